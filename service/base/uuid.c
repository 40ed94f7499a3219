/*
 * uuid.c — see uuid.h.
 */
#include <string.h>

#include "service/base/uuid.h"

int gj_is_uuid(const char *s)
{
    if (!s || strlen(s) != GJ_UUID_LEN)
        return 0;
    for (int i = 0; i < GJ_UUID_LEN; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return 0;
        }
    }
    return 1;
}

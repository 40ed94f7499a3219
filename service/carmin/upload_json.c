/*
 * upload_json.c — CARMIN's application/carmin+json upload (UploadData): base64 in a JSON body,
 * with an optional MD5 of the decoded bytes; type File is a file's bytes, type Archive a zip
 * that makes a directory (extracted by upload_archive.c).
 */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/base/base64.h"
#include "service/carmin/carmin_fs.h"

int carmin_upload_json_decode(const char *body, size_t len, unsigned char **out, size_t *n, int *archive,
                              const char **why)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *b64 = json_string_value(json_object_get(j, "base64Content")),
               *type = json_string_value(json_object_get(j, "type")), *md5 = json_string_value(json_object_get(j, "md5"));
    *out = NULL;
    *archive = type && strcmp(type, "Archive") == 0;
    *why = !b64 || !type ? "the body is CARMIN UploadData: {base64Content, type, md5 (optional)}"
           : strcmp(type, "File") != 0 && !*archive ? "type is File or Archive (a zip)"
                                                    : NULL;
    size_t cap = b64 ? strlen(b64) / 4 * 3 + 3 : 0;
    long got = -1;
    if (!*why && !(*out = malloc(cap + 1)))
        *why = "out of memory";
    if (!*why && (got = gj_base64_decode(b64, strlen(b64), *out, cap, GJ_BASE64_STD)) < 0)
        *why = "base64Content is not base64";
    if (!*why && md5) {
        unsigned char d[16];
        char hex[33];
        unsigned int dn = 0;
        if (EVP_Digest(*out, (size_t)got, d, &dn, EVP_md5(), NULL) != 1 || dn != 16)
            *why = "out of memory";
        for (int i = 0; !*why && i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", d[i]);
        if (!*why && strcasecmp(hex, md5) != 0)
            *why = "the content does not match its md5; nothing was stored";
    }
    json_decref(j);
    if (*why) {
        free(*out);
        *out = NULL;
        return -1;
    }
    *n = (size_t)got;
    return 0;
}

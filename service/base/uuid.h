/*
 * uuid.h — the one check of a UUID the service receives (path parameters, cursors,
 * job and blob ids) before it reaches a `$1::uuid` cast.
 */
#ifndef GJ_UUID_H
#define GJ_UUID_H

#define GJ_UUID_LEN 36   /* 8-4-4-4-12 hex digits and dashes, without the NUL */

/* 1 when s is a canonical UUID, 8-4-4-4-12 hex digits of either case (so a ::uuid
 * cast cannot fail); 0 otherwise, NULL included. */
int gj_is_uuid(const char *s);

#endif

/*
 * webhook_sign.c — the signature of a callback, as Standard Webhooks defines it (workflow.h):
 * "v1," base64(HMAC-SHA256(secret, msg_id "." timestamp "." body)).
 */
#include <stdio.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "service/base/base64.h"
#include "service/workflow/workflow.h"

void gj_webhook_sign(const unsigned char *secret, size_t secret_len, const char *msg_id, long long timestamp,
                     const char *body, size_t body_len, char out[GJ_WEBHOOK_SIGNATURE_MAX])
{
    char head[160];
    int hn = snprintf(head, sizeof head, "%s.%lld.", msg_id, timestamp);
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t mac_len = 0;
    out[0] = '\0';
    EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
    OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                            OSSL_PARAM_construct_end() };
    int ok = ctx && hn > 0 && (size_t)hn < sizeof head && EVP_MAC_init(ctx, secret, secret_len, params) &&
             EVP_MAC_update(ctx, (const unsigned char *)head, (size_t)hn) &&
             EVP_MAC_update(ctx, (const unsigned char *)body, body_len) && EVP_MAC_final(ctx, mac, &mac_len, sizeof mac);
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(hmac);
    if (!ok)
        return;                   /* an empty signature: the receiver refuses the call */
    memcpy(out, "v1,", 3);
    gj_base64_encode(mac, mac_len, out + 3, GJ_WEBHOOK_SIGNATURE_MAX - 3, GJ_BASE64_STD);
}

void gj_webhook_secret_text(const unsigned char *secret, size_t secret_len, char out[GJ_WEBHOOK_SECRET_TEXT_MAX])
{
    memcpy(out, "whsec_", 6);
    if (gj_base64_encode(secret, secret_len, out + 6, GJ_WEBHOOK_SECRET_TEXT_MAX - 6, GJ_BASE64_STD) < 0)
        out[0] = '\0';
}

/*
 * dicom_elements.c — every element of a parsed dataset in file order (dicom.h), for
 * callers that encode the whole dataset (DICOM JSON, PS3.18 F.2) rather than read
 * a few tags.
 */
#include "dicom_internal.h"

#define TAG_ITEM GJ_TAG(0xFFFE, 0xE000)

size_t gj_dicom_element_count(const gj_dicom *d)
{
    return d->n_el;
}

void gj_dicom_element_at(const gj_dicom *d, size_t i, struct gj_dicom_element *out)
{
    const struct gj_dcm_elem *e = &d->el[i];
    int item = e->tag == TAG_ITEM && !e->vr;
    uint16_t vr = item ? 0 : e->vr ? e->vr : GJ_VR('U', 'N');
    out->tag = e->tag;
    out->vr[0] = (char)(vr >> 8);
    out->vr[1] = (char)(vr & 0xFF);
    out->vr[2] = '\0';
    out->depth = e->depth;
    out->sequence = vr == GJ_VR('S', 'Q');
    out->encapsulated = !item && !out->sequence && !e->val && e->tag == GJ_DCM_PixelData;
    out->big_endian = e->be;
    out->value = e->val;
    out->length = e->len;
}

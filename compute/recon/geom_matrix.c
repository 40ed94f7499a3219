/*
 * geom_matrix.c — the 3x4 projection matrices of cone views (given, or those of the
 * circular geometry) and what the projectors derive from them.
 */
#include <math.h>
#include <string.h>

#include "recon/recon.h"

/* The circular geometry's matrix of view v: pixel col = (u - off_u)/du + (cols-1)/2 with
 * u = sdd (P.a)/L, L = sod + P.e; row likewise with v = sdd z / L. Its depth row is the unit
 * vector e, so w = L (the normalised form). */
static void circular_matrix(const struct rc_geom *g, int v, double *A)
{
    double b = g->angles[v], ca = cos(b), sa = sin(b);
    double a[3] = { ca, sa, 0 }, e[3] = { -sa, ca, 0 };
    double r0[4], r1[4], r2[4];
    double cu = 0.5 * (g->cols - 1) - g->off_u / g->du, cv = 0.5 * (g->rows - 1) - g->off_v / g->dv;
    for (int k = 0; k < 3; k++) {
        r2[k] = e[k];
        r0[k] = g->sdd / g->du * a[k] + cu * e[k];
        r1[k] = g->sdd / g->dv * (k == 2 ? 1.0 : 0.0) + cv * e[k];
    }
    r2[3] = g->sod;
    r0[3] = cu * g->sod;
    r1[3] = cv * g->sod;
    for (int c = 0; c < 4; c++) {
        A[3 * c + 0] = r0[c];
        A[3 * c + 1] = r1[c];
        A[3 * c + 2] = r2[c];
    }
}

void rc_circular_matrices(const struct rc_geom *g, double *out)
{
    for (int v = 0; v < g->nviews; v++)
        circular_matrix(g, v, out + 12 * v);
}

void rc_view_matrix(const struct rc_geom *g, int v, double A[12])
{
    if (g->mat)
        memcpy(A, g->mat + 12 * v, 12 * sizeof *A);
    else
        circular_matrix(g, v, A);
}

/* Inverse of a 3x3 matrix (row-major); -1 when it is singular. */
int rc_inv3(const double m[9], double r[9])
{
    double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                 m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (fabs(det) < 1e-300)
        return -1;
    r[0] = (m[4] * m[8] - m[5] * m[7]) / det;
    r[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    r[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    r[3] = (m[5] * m[6] - m[3] * m[8]) / det;
    r[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    r[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    r[6] = (m[3] * m[7] - m[4] * m[6]) / det;
    r[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    r[8] = (m[0] * m[4] - m[1] * m[3]) / det;
    return 0;
}

int rc_matrix_ray(const struct rc_geom *g, int v, double Mi[9], double C[3])
{
    const double *A = g->mat + 12 * v;
    double M[9];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            M[3 * r + k] = A[3 * k + r];
    if (rc_inv3(M, Mi))
        return -1;
    for (int r = 0; r < 3; r++)
        C[r] = -(Mi[3 * r] * A[9] + Mi[3 * r + 1] * A[10] + Mi[3 * r + 2] * A[11]);
    return 0;
}

/*
 * job_state.c — the states of a job, their stored and public names, the moves between them
 * and the cancel and delete rules (job_state.h).
 */
#include "service/jobs/job_state.h"

#include <string.h>

static const struct {
    const char *name;       /* jobs.state */
    const char *shown;      /* the public state */
} states[GJ_JOB_STATE_COUNT] = {
    [GJ_JOB_QUEUED] = { "queued", "queued" },
    [GJ_JOB_RUNNING] = { "running", "running" },
    [GJ_JOB_SUBTASKS] = { "subtasks", "running" },
    [GJ_JOB_WAITING] = { "waiting", "waiting" },
    [GJ_JOB_SUCCEEDED] = { "succeeded", "succeeded" },
    [GJ_JOB_FAILED] = { "failed", "failed" },
    [GJ_JOB_CANCELED] = { "canceled", "canceled" },
};

/* The public states, in the order GET /v1/jobs documents them. */
static const char *const public_states[] = { "queued", "waiting", "running", "succeeded", "failed", "canceled" };

/* moves[from] = the states it may move to (bit per state). */
#define TO(s) (1u << (s))
static const unsigned moves[GJ_JOB_STATE_COUNT] = {
    /* claimed; canceled; failed by a failed sub-task of its parent (a queued parent stage) */
    [GJ_JOB_QUEUED] = TO(GJ_JOB_RUNNING) | TO(GJ_JOB_CANCELED) | TO(GJ_JOB_FAILED),
    /* ends; retried or released (queued); spawns sub-tasks (or none left: queued) */
    [GJ_JOB_RUNNING] = TO(GJ_JOB_SUCCEEDED) | TO(GJ_JOB_FAILED) | TO(GJ_JOB_CANCELED) | TO(GJ_JOB_QUEUED) |
                       TO(GJ_JOB_SUBTASKS),
    /* the last sub-task succeeded (next stage); one failed; canceled */
    [GJ_JOB_SUBTASKS] = TO(GJ_JOB_QUEUED) | TO(GJ_JOB_FAILED) | TO(GJ_JOB_CANCELED),
    /* every input exists; an upstream failed or went; canceled */
    [GJ_JOB_WAITING] = TO(GJ_JOB_QUEUED) | TO(GJ_JOB_FAILED) | TO(GJ_JOB_CANCELED),
};

const char *gj_job_state_name(enum gj_job_state s)
{
    return (unsigned)s < GJ_JOB_STATE_COUNT ? states[s].name : "unknown";
}

int gj_job_state_parse(const char *name, enum gj_job_state *s)
{
    for (int i = 0; name && i < GJ_JOB_STATE_COUNT; i++)
        if (strcmp(name, states[i].name) == 0) {
            *s = (enum gj_job_state)i;
            return 0;
        }
    return -1;
}

const char *gj_job_state_public(enum gj_job_state s, int stage)
{
    if (s == GJ_JOB_QUEUED && stage > 0)
        return "running";           /* a parent between its stages */
    return (unsigned)s < GJ_JOB_STATE_COUNT ? states[s].shown : "unknown";
}

const char *const *gj_job_public_states(int *n)
{
    *n = (int)(sizeof public_states / sizeof public_states[0]);
    return public_states;
}

int gj_job_public_state_known(const char *name)
{
    int n;
    const char *const *all = gj_job_public_states(&n);
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, all[i]) == 0)
            return 1;
    return 0;
}

int gj_job_state_final(enum gj_job_state s)
{
    return s == GJ_JOB_SUCCEEDED || s == GJ_JOB_FAILED || s == GJ_JOB_CANCELED;
}

int gj_job_public_final(const char *name)
{
    enum gj_job_state s;
    return gj_job_public_state_known(name) && gj_job_state_parse(name, &s) == 0 && gj_job_state_final(s);
}

int gj_job_state_can_move(enum gj_job_state from, enum gj_job_state to)
{
    if ((unsigned)from >= GJ_JOB_STATE_COUNT || (unsigned)to >= GJ_JOB_STATE_COUNT)
        return 0;
    return (moves[from] & TO(to)) != 0;
}

enum gj_job_cancel_rule gj_job_cancel_rule(enum gj_job_state s)
{
    if (gj_job_state_final(s))
        return GJ_CANCEL_FINISHED;
    return s == GJ_JOB_RUNNING ? GJ_CANCEL_ASK_WORKER : GJ_CANCEL_NOW;
}

enum gj_job_delete_rule gj_job_delete_rule(enum gj_job_state s, int is_subtask)
{
    if (is_subtask)
        return GJ_DELETE_REFUSED_SUBTASK;
    return s == GJ_JOB_RUNNING ? GJ_DELETE_WHEN_STOPPED : GJ_DELETE_NOW;
}

/*
 * job_state.h — a job's states, their names and the moves between them: the one list
 * every reader and writer of jobs.state uses (migration 0016 names the same states in SQL).
 * Plain C, no SQL: the unit test walks every pair of states.
 *
 *   queued -> running -> succeeded | failed | canceled        (and back to queued: a retry)
 *   running -> subtasks -> queued (the next stage)             (a parent whose sub-tasks run)
 *   waiting -> queued                                          (its inputs from other jobs exist)
 *
 * The public name is the state's own name, except 'subtasks' (and a queued job at stage > 0,
 * a parent between its stages), which the API shows as 'running'.
 */
#ifndef GJ_JOB_STATE_H
#define GJ_JOB_STATE_H

enum gj_job_state {
    GJ_JOB_QUEUED,      /* claimable (once run_after is past) */
    GJ_JOB_RUNNING,     /* leased by a worker */
    GJ_JOB_SUBTASKS,    /* a parent waiting for its sub-tasks; shown as running */
    GJ_JOB_WAITING,     /* waiting for other jobs' outputs it takes as inputs */
    GJ_JOB_SUCCEEDED,
    GJ_JOB_FAILED,
    GJ_JOB_CANCELED,
    GJ_JOB_STATE_COUNT
};

/* The name stored in jobs.state. */
const char *gj_job_state_name(enum gj_job_state s);

/* The state stored under name: 0 with *s set, -1 when name is none of them. */
int gj_job_state_parse(const char *name, enum gj_job_state *s);

/* What the API shows (GET /v1/jobs, CARMIN, events, metrics): one of the public states. */
const char *gj_job_state_public(enum gj_job_state s, int stage);

/* The public states, in the order listings and metrics use; n of them in *n. */
const char *const *gj_job_public_states(int *n);

/* 1 when name is a public state (a ?state= filter). */
int gj_job_public_state_known(const char *name);

/* 1 for succeeded, failed, canceled: nothing changes the job any more. */
int gj_job_state_final(enum gj_job_state s);

/* 1 when name, a public state (a job as the API shows it), is final. */
int gj_job_public_final(const char *name);

/* 1 when the queue, a worker or a trigger may move a job from one state to the other. */
int gj_job_state_can_move(enum gj_job_state from, enum gj_job_state to);

/* Cancel: a job that no worker runs is canceled at once; a running one is asked to stop
 * (cancel_requested) and ends when its worker sees it. */
enum gj_job_cancel_rule { GJ_CANCEL_FINISHED, GJ_CANCEL_NOW, GJ_CANCEL_ASK_WORKER };
enum gj_job_cancel_rule gj_job_cancel_rule(enum gj_job_state s);

/* Delete (DELETE /v1/jobs/{id} and CARMIN's DELETE /rest/executions/{id} alike): a sub-task
 * goes only with its parent; a job no worker runs goes at once (canceled first when it has
 * not finished); a running one is canceled and goes once its worker has stopped. */
enum gj_job_delete_rule { GJ_DELETE_NOW, GJ_DELETE_WHEN_STOPPED, GJ_DELETE_REFUSED_SUBTASK };
enum gj_job_delete_rule gj_job_delete_rule(enum gj_job_state s, int is_subtask);

#endif

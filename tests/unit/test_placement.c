/*
 * test_placement.c — device placement with simulated GPUs: the three policies,
 * memory reservations, WAIT vs NEVER, the CPU fallback, the blocking wait, and
 * seed 000's finding as a discrete-time simulation: least-loaded never leaves a
 * GPU slot idle while tasks wait; round-robin and random (load-oblivious) do.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "infer/serving/gpu_accounting.h"
#include "service/infer/module_parts.h"
#include "service/jobs/placement.h"

#define GIB (1ull << 30)

static const struct gj_place_request any_gpu = { 1, 0, 0, 0 };

static void test_least_loaded_order(void **state)
{
    (void)state;
    struct gj_placement p;
    const uint64_t mem[3] = { 8 * GIB, 16 * GIB, 12 * GIB };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 3, mem, 2, 0, 1);
    int d = -2;
    /* All idle: the most free memory first (1, then 2, then 0). */
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 1);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 2);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 0);
    /* One each: again by free memory. */
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 1);
    /* Free GPU 2's task: it has the fewest running now. */
    gj_place_release(&p, 2, 0);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 2);
    gj_placement_destroy(&p);

    /* Equal memory and load: the lowest index. */
    const uint64_t same[3] = { GIB, GIB, GIB };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 3, same, 1, 0, 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
        assert_int_equal(d, i);
    }
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACE_WAIT);
    assert_int_equal(gj_place_free_slots(&p), 0);
    gj_placement_destroy(&p);
}

static void test_round_robin(void **state)
{
    (void)state;
    struct gj_placement p;
    const uint64_t mem[3] = { GIB, 4 * GIB, GIB };
    gj_placement_init(&p, GJ_PLACE_ROUND_ROBIN, 3, mem, 2, 0, 1);
    int d = -2;
    int expect[6] = { 0, 1, 2, 0, 1, 2 };
    for (int i = 0; i < 6; i++) {
        assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
        assert_int_equal(d, expect[i]);
    }
    /* All full: wait; after GPU 1 frees a slot, the turn is GPU 0's, so still wait. */
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACE_WAIT);
    gj_place_release(&p, 1, 0);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACE_WAIT);
    gj_place_release(&p, 0, 0);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 0);
    /* Next turn: GPU 1 (free slot). */
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 1);
    gj_placement_destroy(&p);

    /* GPUs a job does not fit at all are skipped. */
    gj_placement_init(&p, GJ_PLACE_ROUND_ROBIN, 3, mem, 2, 0, 1);
    struct gj_place_request big = { 1, 1, 2 * GIB, 0 };
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gj_place_try(&p, &big, &d), GJ_PLACED_GPU);
        assert_int_equal(d, 1);
        gj_place_release(&p, 1, 2 * GIB);
    }
    gj_placement_destroy(&p);
}

static void test_random_seeded(void **state)
{
    (void)state;
    const uint64_t mem[4] = { GIB, GIB, GIB, GIB };
    int seq[2][64];
    for (int run = 0; run < 2; run++) {
        struct gj_placement p;
        gj_placement_init(&p, GJ_PLACE_RANDOM, 4, mem, 1000, 0, 12345);
        for (int i = 0; i < 64; i++) {
            int d = -2;
            assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
            assert_in_range(d, 0, 3);
            seq[run][i] = d;
            gj_place_release(&p, d, 0);
        }
        gj_placement_destroy(&p);
    }
    assert_memory_equal(seq[0], seq[1], sizeof seq[0]);   /* same seed, same draws */
    int seen[4] = { 0 };
    for (int i = 0; i < 64; i++)
        seen[seq[0][i]]++;
    for (int i = 0; i < 4; i++)
        assert_true(seen[i] > 0);

    /* A different seed gives a different sequence. */
    struct gj_placement p;
    gj_placement_init(&p, GJ_PLACE_RANDOM, 4, mem, 1000, 0, 999);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        int d = -2;
        assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
        differ += d != seq[0][i];
        gj_place_release(&p, d, 0);
    }
    assert_true(differ > 0);
    gj_placement_destroy(&p);
}

static void test_memory_wait_never(void **state)
{
    (void)state;
    struct gj_placement p;
    const uint64_t mem[2] = { 1000, 1000 };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 2, mem, 4, 1, 1);
    struct gj_place_request r600 = { 1, 0, 600, 0 };
    int d = -2;
    assert_int_equal(gj_place_try(&p, &r600, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 0);
    assert_int_equal(gj_place_try(&p, &r600, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 1);
    /* Slots are free, memory is not: it fits a GPU later, so it waits (no CPU fallback). */
    assert_int_equal(gj_place_try(&p, &r600, &d), GJ_PLACE_WAIT);
    /* A small one still fits beside. */
    struct gj_place_request r400 = { 1, 0, 400, 0 };
    assert_int_equal(gj_place_try(&p, &r400, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 0);

    struct gj_placement snap;
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.gpus[0].reserved_bytes, 1000);
    assert_int_equal(snap.gpus[0].running, 2);
    assert_int_equal(snap.gpus[1].reserved_bytes, 600);

    /* Fits no GPU at all: the CPU when it can run there, NEVER when it needs a GPU. */
    struct gj_place_request huge = { 1, 0, 5000, 0 };
    assert_int_equal(gj_place_try(&p, &huge, &d), GJ_PLACED_CPU);
    assert_int_equal(d, -1);
    assert_int_equal(gj_place_try(&p, &huge, &d), GJ_PLACE_WAIT);   /* the CPU slot is taken */
    struct gj_place_request huge_gpu = { 1, 1, 5000, 0 };
    assert_int_equal(gj_place_try(&p, &huge_gpu, &d), GJ_PLACE_NEVER);

    /* Release GPU 1's 600: the waiting 600 fits there now. */
    gj_place_release(&p, 1, 600);
    assert_int_equal(gj_place_try(&p, &r600, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 1);
    gj_place_release(&p, -1, 0);
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.cpu_running, 0);
    assert_int_equal(snap.cpu_completed, 1);
    assert_int_equal(snap.gpus[1].completed, 1);
    assert_int_equal(snap.gpus[1].reserved_bytes, 600);
    gj_placement_destroy(&p);
}

static void test_cpu_fallback(void **state)
{
    (void)state;
    struct gj_placement p;
    /* No GPU configured: GPU-capable jobs run on the CPU; GPU-only jobs never. */
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 0, NULL, 2, 2, 1);
    int d = -2;
    assert_int_equal(gj_place_free_slots(&p), 2);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_CPU);
    assert_int_equal(d, -1);
    struct gj_place_request cpu_only = { 0, 0, 0, 0 };
    assert_int_equal(gj_place_try(&p, &cpu_only, &d), GJ_PLACED_CPU);
    assert_int_equal(gj_place_try(&p, &cpu_only, &d), GJ_PLACE_WAIT);
    struct gj_place_request gpu_only = { 1, 1, 0, 0 };
    assert_int_equal(gj_place_try(&p, &gpu_only, &d), GJ_PLACE_NEVER);
    gj_placement_destroy(&p);

    /* GPUs but a CPU-only job: CPU slot; with no CPU slots at all it can never run. */
    const uint64_t mem[1] = { GIB };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 1, mem, 1, 1, 1);
    assert_int_equal(gj_place_try(&p, &cpu_only, &d), GJ_PLACED_CPU);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 0);
    /* GPU busy, job fits it: waits rather than falling back to the CPU. */
    gj_place_release(&p, -1, 0);
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACE_WAIT);
    gj_placement_destroy(&p);

    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 1, mem, 1, 0, 1);
    assert_int_equal(gj_place_try(&p, &cpu_only, &d), GJ_PLACE_NEVER);
    gj_placement_destroy(&p);
}

struct waiter {
    struct gj_placement *p;
    struct gj_place_request req;
    volatile int stop;
    int device;
    enum gj_place_outcome outcome;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->outcome = gj_place_wait(w->p, &w->req, &w->device, &w->stop);
    return NULL;
}

static void test_wait_blocks_until_release_or_stop(void **state)
{
    (void)state;
    struct gj_placement p;
    const uint64_t mem[1] = { 1000 };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 1, mem, 1, 0, 1);
    int d;
    assert_int_equal(gj_place_try(&p, &any_gpu, &d), GJ_PLACED_GPU);

    struct waiter w = { .p = &p, .req = { 1, 0, 10 }, .device = -5 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    usleep(100000);
    assert_int_equal(w.device, -5);   /* still waiting */
    gj_place_release(&p, 0, 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.outcome, GJ_PLACED_GPU);
    assert_int_equal(w.device, 0);

    /* Busy again: a stop request ends the wait with WAIT. */
    struct waiter w2 = { .p = &p, .req = { 1, 0, 10 }, .device = -5 };
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w2), 0);
    usleep(50000);
    w2.stop = 1;
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w2.outcome, GJ_PLACE_WAIT);

    /* NEVER comes back at once. */
    struct waiter w3 = { .p = &p, .req = { 1, 1, 5000 }, .device = -5 };
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w3), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w3.outcome, GJ_PLACE_NEVER);
    gj_placement_destroy(&p);
}

/* Host memory is one budget over every device: WAIT while it is held, NEVER_HOST past it. */
static void test_host_memory_budget(void **state)
{
    (void)state;
    struct gj_placement p;
    const uint64_t mem[1] = { 1000 };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 1, mem, 4, 4, 1);
    gj_placement_set_host(&p, 1000);
    struct gj_place_request gpu600 = { 1, 0, 100, 600 }, cpu600 = { 0, 0, 0, 600 };
    struct gj_place_request cpu400 = { 0, 0, 0, 400 }, cpu1001 = { 0, 0, 0, 1001 };
    int d = -2;
    assert_int_equal(gj_place_try(&p, &gpu600, &d), GJ_PLACED_GPU);
    /* Slots and device memory are free; host memory is not, on the CPU as on the GPU. */
    assert_int_equal(gj_place_try(&p, &cpu600, &d), GJ_PLACE_WAIT);
    assert_int_equal(gj_place_try(&p, &gpu600, &d), GJ_PLACE_WAIT);
    assert_int_equal(gj_place_try(&p, &cpu1001, &d), GJ_PLACE_NEVER_HOST);
    assert_int_equal(gj_place_try(&p, &cpu400, &d), GJ_PLACED_CPU);   /* exactly what is left */
    struct gj_placement snap;
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.host_reserved, 1000);
    assert_int_equal(snap.gpus[0].reserved_bytes, 100);

    /* A waiter for host memory wakes when a job gives its host bytes back. */
    struct waiter w = { .p = &p, .req = cpu600, .device = -5 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    usleep(100000);
    assert_int_equal(w.device, -5);
    gj_place_release_job(&p, 0, 100, 600);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.outcome, GJ_PLACED_CPU);
    gj_place_release_job(&p, -1, 0, 600);
    gj_place_release_job(&p, -1, 0, 400);
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.host_reserved, 0);
    assert_int_equal(snap.cpu_running, 0);

    /* A device wait reserves no host memory: a job placed nowhere holds nothing. */
    struct gj_place_request big_gpu = { 1, 1, 2000, 10 };
    assert_int_equal(gj_place_try(&p, &big_gpu, &d), GJ_PLACE_NEVER);
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.host_reserved, 0);
    gj_placement_destroy(&p);

    /* Not counted (0): any size goes. */
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 0, NULL, 1, 1, 1);
    assert_int_equal(gj_place_try(&p, &cpu1001, &d), GJ_PLACED_CPU);
    gj_placement_destroy(&p);
}

/* ---- seed 000: a stream of tasks over 3 GPUs ---------------------------- */

struct sim_result {
    long idle_slot_steps;     /* free GPU slot-steps while tasks waited */
    long idle_device_steps;   /* GPU-steps with nothing running while tasks waited */
    long backlog_steps;       /* steps with tasks waiting */
    long completed;
    double mean_wait;
};

static uint64_t sim_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

#define SIM_GPUS 3
#define SIM_SLOTS 2
#define SIM_STEPS 20000
#define SIM_MAXQ 100000

static struct sim_result simulate(enum gj_placement_policy policy)
{
    struct gj_placement p;
    const uint64_t mem[SIM_GPUS] = { 16 * GIB, 16 * GIB, 16 * GIB };
    gj_placement_init(&p, policy, SIM_GPUS, mem, SIM_SLOTS, 0, 7);
    static int q_dur[SIM_MAXQ], q_arrival[SIM_MAXQ];
    int q_head = 0, q_tail = 0;
    int run_dev[SIM_GPUS * SIM_SLOTS], run_end[SIM_GPUS * SIM_SLOTS];
    int n_run = 0;
    uint64_t rng = 0x5eed000ull;   /* the same task stream for every policy */
    struct sim_result res = { 0 };
    double waited = 0;
    for (int t = 0; t < SIM_STEPS; t++) {
        for (int i = 0; i < n_run;) {
            if (run_end[i] <= t) {
                gj_place_release(&p, run_dev[i], 0);
                run_dev[i] = run_dev[n_run - 1];
                run_end[i] = run_end[n_run - 1];
                n_run--;
                res.completed++;
            } else {
                i++;
            }
        }
        /* Arrivals: 0-2 per step (mean 1), durations 1-8 steps (mean 4.5): load 75%. */
        int arrivals = (int)(sim_rand(&rng) % 3);
        for (int a = 0; a < arrivals && q_tail < SIM_MAXQ; a++) {
            q_dur[q_tail] = 1 + (int)(sim_rand(&rng) % 8);
            q_arrival[q_tail] = t;
            q_tail++;
        }
        /* FIFO dispatch until the head has to wait. */
        while (q_head < q_tail) {
            int d = -2;
            enum gj_place_outcome o = gj_place_try(&p, &any_gpu, &d);
            if (o != GJ_PLACED_GPU)
                break;
            run_dev[n_run] = d;
            run_end[n_run] = t + q_dur[q_head];
            n_run++;
            waited += t - q_arrival[q_head];
            q_head++;
        }
        if (q_head < q_tail) {
            struct gj_placement snap;
            gj_place_snapshot(&p, &snap);
            res.backlog_steps++;
            for (int g = 0; g < SIM_GPUS; g++) {
                res.idle_slot_steps += snap.gpus[g].slots - snap.gpus[g].running;
                res.idle_device_steps += snap.gpus[g].running == 0;
            }
        }
    }
    res.mean_wait = q_head ? waited / q_head : 0;
    gj_placement_destroy(&p);
    return res;
}

static void test_seed000_least_loaded_keeps_devices_busy(void **state)
{
    (void)state;
    struct sim_result ll = simulate(GJ_PLACE_LEAST_LOADED);
    struct sim_result rr = simulate(GJ_PLACE_ROUND_ROBIN);
    struct sim_result rnd = simulate(GJ_PLACE_RANDOM);
    print_message("least-loaded: backlog %ld steps, idle slot-steps %ld, idle GPU-steps %ld, mean wait %.2f\n",
                  ll.backlog_steps, ll.idle_slot_steps, ll.idle_device_steps, ll.mean_wait);
    print_message("round-robin:  backlog %ld steps, idle slot-steps %ld, idle GPU-steps %ld, mean wait %.2f\n",
                  rr.backlog_steps, rr.idle_slot_steps, rr.idle_device_steps, rr.mean_wait);
    print_message("random:       backlog %ld steps, idle slot-steps %ld, idle GPU-steps %ld, mean wait %.2f\n",
                  rnd.backlog_steps, rnd.idle_slot_steps, rnd.idle_device_steps, rnd.mean_wait);
    /* The stream does back up, so the comparison means something. */
    assert_true(ll.backlog_steps > 100);
    /* least-loaded: never an idle slot (let alone an idle GPU) while tasks wait. */
    assert_int_equal(ll.idle_slot_steps, 0);
    assert_int_equal(ll.idle_device_steps, 0);
    /* The load-oblivious policies leave capacity idle while tasks wait... */
    assert_true(rr.idle_slot_steps > 0);
    assert_true(rnd.idle_slot_steps > 0);
    assert_true(rr.idle_device_steps > 0);
    assert_true(rnd.idle_device_steps > 0);
    /* ...so tasks wait longer. */
    assert_true(ll.mean_wait < rr.mean_wait);
    assert_true(ll.mean_wait < rnd.mean_wait);
}

/* Loaded models' memory (the inference batchers) through the accounting hook the
 * inference module makes of the placement: reserved beside jobs, refused when it does not
 * fit, seen by the job placement, released; once detached, nothing is counted. */
static void test_model_memory_hook(void **state)
{
    (void)state;
    struct gj_placement p;
    const uint64_t mem[2] = { 1000, 1000 };
    gj_placement_init(&p, GJ_PLACE_LEAST_LOADED, 2, mem, 2, 1, 1);
    assert_int_equal(gj_gpu_acct_count(), -1);
    gj_infer_gpu_accounting_attach(&p);
    gj_infer_gpu_accounting_attach(&p);   /* idempotent */
    assert_int_equal(gj_gpu_acct_count(), 2);

    uint64_t gen;
    struct gj_gpu_load l;
    assert_int_equal(gj_gpu_acct_reserve(0, 700, &gen, &l), 0);
    assert_int_equal(gj_gpu_acct_reserve(0, 400, &gen, &l), -1);   /* 300 free */
    assert_int_equal(l.total_bytes, 1000);
    assert_int_equal(l.reserved_bytes, 700);
    assert_int_equal(gj_gpu_acct_reserve(7, 1, &gen, &l), -1);     /* no such GPU */
    assert_int_equal(gj_gpu_acct_load(0, &l), 0);
    assert_int_equal(l.running, 0);   /* a model holds memory, not a task slot */

    /* Jobs see the model's memory: 400 goes to GPU 1 (GPU 0 has 300 free). */
    struct gj_place_request r400 = { 1, 0, 400, 0 };
    int d = -2;
    assert_int_equal(gj_place_try(&p, &r400, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 1);
    assert_int_equal(gj_gpu_acct_load(1, &l), 0);
    assert_int_equal(l.running, 1);
    assert_int_equal(l.reserved_bytes, 400);

    /* A job that fits nowhere now waits, and fits GPU 0 once the model goes. */
    struct gj_placement snap;
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.gpus[0].reserved_bytes, 700);
    struct gj_place_request r900 = { 1, 1, 900, 0 };
    assert_int_equal(gj_place_try(&p, &r900, &d), GJ_PLACE_WAIT);
    gj_gpu_acct_release(0, 700, gen);
    assert_int_equal(gj_place_try(&p, &r900, &d), GJ_PLACED_GPU);
    assert_int_equal(d, 0);
    gj_place_release(&p, 0, 900);
    gj_place_release(&p, 1, 400);
    gj_place_snapshot(&p, &snap);
    assert_int_equal(snap.gpus[0].reserved_bytes, 0);
    assert_int_equal(snap.gpus[1].reserved_bytes, 0);
    assert_int_equal(snap.gpus[0].completed, 1);   /* the job; a model is not a task */

    gj_infer_gpu_accounting_detach();
    assert_int_equal(gj_gpu_acct_count(), -1);
    gj_placement_destroy(&p);
    gj_gpu_acct_release(0, 700, gen);   /* after the placement went: a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_least_loaded_order),
        cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_random_seeded),
        cmocka_unit_test(test_memory_wait_never),
        cmocka_unit_test(test_cpu_fallback),
        cmocka_unit_test(test_wait_blocks_until_release_or_stop),
        cmocka_unit_test(test_host_memory_budget),
        cmocka_unit_test(test_seed000_least_loaded_keeps_devices_busy),
        cmocka_unit_test(test_model_memory_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

-- 0003_host_memory.sql — host memory admission (issue 11): what each worker offers its
-- jobs (host or cgroup memory minus the service's reserve), so that a submit whose
-- job can fit no worker is refused at once. NULL: the worker does not count host memory.
ALTER TABLE workers ADD COLUMN host_memory_bytes bigint;

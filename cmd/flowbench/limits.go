package main

// limits is what holds back the figures that miss their targets, from the
// profiles above and the counted transactions; it describes the design, so
// it changes only when the design does.
const limits = `### What limits the missed figures

- **(b) ingest.** Every 200 waits for a durable commit (WAL, ` + "`synchronous=FULL`" + `). Group commit lets
  all the webhooks waiting at one moment share one fsync (BenchmarkEnqueueParallel against
  BenchmarkEnqueue in (f) shows the gain for the store alone), but the single SQLite writer also
  carries the workers' transactions, and the receiver, the workers and the load generator share two
  cores. The CPU profile in (b) has the SQLite statement parser (` + "`_sqlite3RunParser`" + `) near the top:
  database/sql with this driver prepares every statement text again on each call. The writer now
  prepares the run path's statements once (sqlitestore exec and queryRow); the reads still parse each
  query. ` + "`Syscall6`" + ` is the network and the fsyncs.
- **(c) end to end.** A run waits for two write commits on the worker path: the queue claim, which
  claims the run in the same transaction, and the finish, which adds the flow's stats and removes the
  queue entry in the same transaction (the worker's acknowledgement is then a read). Journal writes
  between side-effecting steps add one each. With the default sixteen workers up to sixteen runs' writes
  share one fsync; what is left is the single writer's CPU per transaction and the two cores shared with the receiver, the sink and the load generator. Claiming
  and finishing in batches is the next structural step.
- **(d) ON_COMPLETION overhead.** The bench flow (SET, SET, RESPOND) has no side effects, so its run is
  executed in memory and committed once, final, before the answer: one fsync (about 0.3 ms on this
  disk; BenchmarkInsertFinishedRun) plus the receiver's CPU. A flow with an HTTP, CODE, STORE or WAIT
  step takes two commits (stored claimed by its receiver, which executes it inline, then finished):
  the "with an HTTP step" rows. A pure run that needs more than 1 s in memory (or the sync timeout, if
  shorter) is dropped and takes that two-commit path, executed again.
- **(e) run lists and search at 1,000,000 runs.** A page is one index scan over each run's summary
  column (written with the run), through statements prepared once on the read pool; a search with a
  creation window walks the creation index, so a page costs the same at 20,000 runs as at a million.
  The API writes the page from the stored summary JSON (only ` + "`attempts`" + ` is taken from its column),
  with no decode and re-encode in Go (BenchmarkRunListPage in pkg/httpapi: 0.5 ms of CPU for a page of
  100 against 2.5 ms decoded). What is left in the profile is SQLite itself (the VDBE and its
  mutexes), the syscalls and a one-pass check that each stored summary is a JSON object.

`

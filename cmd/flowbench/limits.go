package main

// limits is what holds back the figures that miss their targets, from the
// profiles above and the counted transactions; it describes the design, so
// it changes only when the design does.
const limits = `### What limits the missed figures

- **(b) ingest.** Every 200 waits for a durable commit (WAL, ` + "`synchronous=FULL`" + `), and the webhooks
  waiting at one moment share it: the writer inserts all the runs and queue entries of a batch with
  multi-row statements and no savepoint per caller, run IDs begin with their creation time so that new
  runs append to the indexes, and the Test Trigger's armed state is cached with the flows. What is left
  is CPU on two cores that wrk also uses: 30% of the ceiling leaves flowd about 70 µs of CPU per
  webhook, and the SQLite work of one run in the pure-Go driver (six B-trees on ` + "`runs`" + `, WAL frames and
  checksums, then the claim and finish of the runs the workers execute during the load) is already
  about that much; net/http's request parsing and response writes are about a third of the profile
  in (b). The next steps would be fewer indexes on ` + "`runs`" + ` and the lease in a table of its own (a
  claim now rewrites the whole run row to set it).
- **(c) end to end.** A run costs flowd about 400 µs of CPU (the row "flowd CPU time per finished run"
  in (c)): its durable enqueue, a share of one batched claim (three statements for all idle workers),
  the engine with its HTTP call over a kept-alive connection, and one lean finish that also removes the
  queue entry and adds the flow's stats. In the profile the single SQLite writer is about 46% (commit
  16%, enqueue inserts 11%, finish 9%, claim 6%), net/http server and client about 20%, the engine
  13%, JSON encoding of the run document about 10%. 5,000 runs/s would need about 200 µs per run with
  the load generator and the sink on the same two cores, and the writer alone (about 185 µs per run)
  caps it near 5,400 runs/s even with the cores free. Next: the lease in its own small table, fewer
  indexes, handing the enqueued run to its worker in memory instead of decoding it again.
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

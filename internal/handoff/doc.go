// Package handoff is the decision core of kshard's partition handoff: from the
// ring's Leases as observed, it decides what this replica claims, reconciles,
// drains and releases, and when it must fence itself, leave, or exit.
// It is a pure state machine in the shape of etcd raft: no goroutines, no
// clock, no I/O. The shell (lease/ and manager/) feeds it inputs and carries
// out the Ready it returns.
//
// # Safety model
//
// Invariant: no partition is active (admitting or running reconciles) on two
// replicas at once. Activation and release follow four rules:
//
//   - Claim before act. p becomes active only when the latest observed
//     snapshot of the ring's Leases shows (a) the own Lease claiming p in a
//     Record at least as new as the one that last added p to the claim
//     (Record.Generation; a fence starts a new epoch, so no Record from
//     before it counts), and (b) no other Lease claiming p, in any state,
//     unless that Lease was confirmed expired.
//   - Confirm before void. A Lease looks expired when its resourceVersion has
//     not changed for LeaseDuration of this replica's observed time. Its
//     claims stop counting only after a direct read shows that same version
//     still current (or the Lease gone), and only for as long as the snapshot
//     shows that version. Expired and JudgeConfirm state the rule for every
//     reader, the kshard CLI's release included; RingMember says which
//     live Leases are ring members.
//   - Drain before release. p leaves the published claim only after it left
//     the active set and Drained reported nothing of it in flight.
//   - Absence is not death. A Lease that leaves the view (deleted or
//     relabelled by hand, or filtered out) while its last claim was non-empty
//     and not voided stays as a tombstone: its claim counts until it has
//     been gone for LeaseDuration of observed time and a direct read
//     confirms it still gone (or out of the ring). The last claim is the one
//     last observed, or the one the removing watch event carried (the shell
//     reports departed Leases, Observed.Gone), whichever is larger. Only an
//     observed empty claim, that confirmed expiry, or a proof of death
//     (below) releases it. A Lease created afresh (another UID) by another
//     incarnation keeps the previous incarnation's claim in force for
//     LeaseDuration (a ghost); so does every earlier object (UID) of a name
//     whose departure the shell reports, unless a later Lease of the same
//     incarnation is in the view: a watch that lagged across two deletions
//     of one name learns of the first object's claim only from its
//     departure. The same holds for a replica's own identity: the claim
//     of another incarnation's Lease of it (a predecessor that may still
//     run, or whose Lease it waits to take over) stays in force here for
//     LeaseDuration after that Lease left the view, was replaced by
//     another object or was written over by yet another incarnation,
//     unless its expiry was confirmed. A replica joins the ring only
//     after watching it for LeaseDuration, because a Lease that vanished
//     before it started leaves it no tombstone, unless it can tell that
//     none vanished (fast join): every Lease of its first view carries
//     the member finalizer, so a deletion by hand leaves the Lease in
//     every view, Terminating, until its holder has stopped everything
//     and lets it go (Finalize) or a peer collects it after confirmed
//     expiry; and the shell's scan of the namespace, after the first
//     list, found no finalized Lease relabelled out of the ring
//     (JoinScanClean). A Lease of a kshard that adds no finalizer keeps
//     the wait for everyone. Residual risk: a finalizer removed by hand.
//   - Own Lease lost. A replica that sees its own Lease gone, terminating,
//     damaged, or rewritten by someone else after it held it, fences at
//     once and stays fenced until a renew sent after that moment has
//     succeeded and the Lease is whole again (the shell recreates a deleted
//     Lease, lets a terminating one go only once nothing runs and its empty
//     claim shows (Finalize) and then recreates it, puts back a removed
//     ring label, and rewrites a damaged one only over the version the core
//     names in TakeOver). A
//     Lease written by another incarnation after this one held it is a
//     duplicate identity: the core stops.
//   - Proof of death (proof.go). A Lease whose writer the kubelet reports
//     terminated (same pod UID as the Lease records, and the writer's
//     incarnation marker in a terminated container's termination message)
//     is void at once, whatever its version; the own identity's previous
//     incarnation is then taken over without waiting. A pod that is gone or
//     recreated proves nothing.
//   - Fence. Reconciles stop (Fence) once RenewDeadline has passed since the
//     sending of the last renew that succeeded, and the process must exit
//     (Exit) if any of them still runs at StopDeadline, halfway to
//     LeaseDuration, whether or not renews have succeeded since.
//
// Formation (liveness, not safety): an active replica that holds nothing
// yet leaves every partition unclaimed while a peer of its configuration is
// in its join wait (joining, claiming nothing, first seen joining less
// than 1.5×LeaseDuration ago), so replicas started together each claim
// their own share once the last has joined (awaitingJoiners); a delay of
// at most 1.5×LeaseDuration.
//
// Handover (liveness, not safety): with a partition cache, a replica
// publishes the partitions of its target its cache holds (Record.Warm), and
// an owner keeps a partition that left its target active until the new
// owner's Lease shows it there, for at most HandoverTimeout: make before
// break, so a move does not leave the partition unreconciled while the new
// owner lists it. The partition stays in the old owner's claim throughout,
// so the new owner could not activate it earlier anyway.
//
// Keeping a place (liveness, not safety; Config.KeepPlaceOnLeave): an
// active replica that leaves marks its Record Returning, and a live Lease
// in state leaving or joining so marked places the ring like an active
// one, so no peer targets its partitions while it restarts. Its next
// incarnation takes the Lease over at once when it shows state leaving,
// Returning and an empty claim (leftForReturn): that writer ran nothing
// when it wrote that version and never claims again, and the takeover is
// conditioned on the version. The returning incarnation keeps the mark
// while it joins, for at most LeaseDuration; a peer that dropped the place
// meanwhile (the Lease expired in its view) does not take it back for a
// joiner. Claims are untouched, so safety rests on the rules above alone.
//
// Why it holds: if A and B were both active on p, take the one that activated
// on the later snapshot, say B. A's claim of p landed before A's snapshot and
// stays in A's Lease while A runs p, so B's snapshot shows it; B went ahead
// only because it voided that exact version of A's Lease, which had not
// changed for a LeaseDuration of B's time. A's last successful renew was sent
// before that version landed, so A fenced and stopped (or exited) before B's
// direct read; and any later claim of A needs a write that changes the Lease,
// which ends B's void.
//
// The tombstone covers the window in which the owner has not yet noticed: it
// fences when its watch shows the loss, and otherwise when its renews stop
// counting (a deleted Lease fails every conditional update until recreated),
// both within LeaseDuration of the loss. A Lease that looked expired through
// a lagging watch, and that the confirming read finds gone, is a tombstone
// from that read on: the read may come moments after a deletion by hand
// that its holder has not noticed yet. Residual risk: a peer whose watch
// relists across the deletion (its resourceVersion too old) gets no event
// and, if it never saw the claim either, no tombstone; the join wait covers a
// new replica, but a replica already in the ring in that position relies on
// the owner's fence alone.
//
// Assumptions, and what breaks when they fail:
//   - Clock rates differ by less than the timing tolerates. Expiry uses
//     only each replica's own clock (intervals of observed time; never
//     timestamps written by others), so offsets do not matter, but rates
//     do: a holder whose clock runs at rate r stops everything within
//     StopDeadline of its time after its last renew was sent, a peer whose
//     clock runs at r' voids it LeaseDuration of its time after that renew
//     at the earliest, so safety needs StopDeadline/r < LeaseDuration/r'.
//     With the default timing (StopDeadline = 5/6 LeaseDuration) a holder's
//     clock may run up to 1/6 slower than a peer's; with every clock within
//     ±d of the true rate, d < (LD−SD)/(LD+SD) = 1/11 ≈ 9.1 %. Quartz drifts
//     by parts per million and NTP slews by at most 500 ppm, far inside.
//     Beyond the bound, a holder that loses its renewals (cut off from the
//     API server) may still run a reconcile that ignores cancellation, and
//     further beyond any reconcile, when a peer activates its partitions.
//     The simulation runs with every clock at 1 ± up to 8 %, rates changing
//     mid-run, and must find no violation; TestSimulationFindsClockRateBeyondBound
//     shows that rates far beyond the bound break safety, and `make
//     sim-assumptions` sweeps skews around it.
//   - The watch delivers Lease events in etcd order (the informer's content
//     is always the state at one resourceVersion). Defence: a peer's Lease
//     state older than one already seen of the same writer (a lower
//     Generation of the same incarnation) counts as a change, but the core
//     keeps the newest Record of that writer; without that a reordered view
//     shows a claim dropped that was added back (the simulation's
//     stale-view fault finds it). Not covered: a stale state of an earlier
//     incarnation shown after a later one's (the order of incarnations
//     cannot be told without comparing resourceVersions, and taking the
//     order of sight for it made things worse), a stale view of a Lease
//     this core never saw newer, and stale views of the own Lease: an
//     older own Record is judged by its Generation as any (read-your-write
//     needs the Generation that added a partition), so it can only delay
//     activation or revoke for a moment; an older Record of an incarnation
//     this one took over from reads as a duplicate identity, and the
//     replica stops.
//   - Only this incarnation writes its own Lease, and its writes land in the
//     order sent: writes are conditional on the resourceVersion (Update, not
//     Apply), a write never overwrites a version written by another
//     incarnation unless the core named it (TakeOver), and a conflict is
//     resolved by reading the Lease, never by blind retry. Peers delete
//     Leases only with a version precondition. Third parties (kubectl
//     delete, label --overwrite, edits) break this assumption; the
//     tombstone and own-Lease-lost rules above are the defence, checked by
//     the simulation's tamper fault.
//   - Execution is continuous. A process paused (SIGSTOP, a frozen VM) for
//     longer than LeaseDuration fences at its first step after resuming
//     (its renew deadline has passed), but a reconcile already running
//     resumes too: the workers' validity check and the client transport's
//     refusal of late writes of reconciles and singletons (manager/,
//     controller/) stop it from writing;
//     a request already on the wire may still land.
//   - The shell calls Ready at NextDeadline, cancels reconciles on Fence and
//     exits on Exit promptly, and reports Drained only when nothing of a
//     partition is in flight (the check "is p active?" and the in-flight
//     increment are atomic with respect to Revoke).
//   - Timing: expiry waits a full LeaseDuration of locally observed time and
//     a fenced replica stops within StopDeadline < LeaseDuration, so it has
//     stopped before any peer voids its claims. Renew writes use a
//     client-side timeout no longer than LeaseDuration − RenewDeadline, so a
//     write sent before a fence lands, if at all, before any peer can void
//     the Lease, instead of reviving a fenced replica's old Record later.
//
// Liveness: once membership is stable and the API server reachable, every
// partition is active on exactly one member within one LeaseDuration plus
// the longest drain, counted from the last death; a member that died with a
// write in flight can look alive for one client timeout longer, and one that
// lost its renewals before the faults ended may still exit up to
// StopDeadline later. On a graceful leave: one watch round trip plus the
// drain (a peer whose watch merged the leaver's empty claim with its
// deletion sees a tombstone and waits LeaseDuration instead). A new replica
// joins LeaseDuration after its first list, or at once after a fast join;
// the members cover its partitions meanwhile. A Lease deleted or relabelled by hand delays the
// handoff of its claims by up to LeaseDuration plus a confirming read, and
// not at all when its holder repairs it first.
//
// # Contract with the shell
//
// Inputs: Observe (the informer's full content, after its first list, on
// every change), CachesSynced, RenewSucceeded, Drained, Confirmed or
// ConfirmFailed (answers to Ready.Confirm), Terminated (the kubelet's
// answers to Ready.ProveDeath), SetPod, and Leave. After inputs, and at
// NextDeadline, call Ready with the current local time, carry out what it
// returns and acknowledge it with Advance; what is not acknowledged is asked
// for again. Keep renewing the own Lease with the latest published Record,
// one write in flight at a time; what each write's outcome means (a
// renewal or not, read the Lease, create it afresh, retry) is JudgeWrite's
// decision, and whether to write over the own Lease as read after a
// conflict is JudgeOwnRead's. At start, what to do with the identity's
// Lease as read (create, adopt, take over, wait, restore its ring label, or
// stop on a name collision) is JudgeAcquire's; whether a pod's status
// proves a process ended is ProvesDeath's; which of the namespace's Leases
// let a join skip its wait is JudgeJoinScan's. The shell reports what
// happened and carries the verdict out. Observed carries what the shell read,
// problems included; what a malformed or foreign Lease means is the core's
// decision. Confirm's answer counts a Lease outside the ring's label as
// gone. Members whose ring configuration
// (fingerprint) differs are never part of the view; their non-empty claims
// block every partition, since their partition numbers may name other keys,
// and the replica does not join while such a member is active (Err reports
// it).
//
// The deterministic simulation (internal/handoffsim) checks all of this
// under random crashes, restarts, partitions from the API server, stalled
// and lagging watches, failing and late-landing writes, membership flapping,
// reconciles that ignore cancellation, clocks at different rates, stale
// views, crashes restarted in place whose end the kubelet reports (proofs
// of death) and pods force-deleted while their process may run, twice:
// sim_test.go here drives the core with a built-in shell
// (sim_assumptions_test.go measures the clock-rate and stale-view faults),
// and shard/ring's TestCoordinatorSimulation drives it with the real
// coordinator. Run either with -handoff.seeds=N, replay a failing seed with
// -handoff.seed=S; `make sim` runs 1,000,000 seeds of both, `make
// sim-assumptions` the long clock-rate and stale-view measurements.
package handoff

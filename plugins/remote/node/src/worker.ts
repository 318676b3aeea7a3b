// A worker thread of the pool (pool.ts): builds the envs of its slots, then serves its doorbell
// until the segment is closing (docs/protocol.md section 4, "Waits"). The thread never returns to
// its event loop while serving: it spins, yields, or sleeps on the futex.

import { workerData, parentPort } from "worker_threads";
import { EnvBatch, RecordSink } from "./envbatch";
import { shmAddon } from "./native";
import { GameRef, resolveGame, WorkerConfig } from "./pool";
import { ErrorCode, MsgType, ProtocolError } from "./protocol";
import { makeRunner } from "./subsim";
import {
  FLAG_ALL_SEATS, FLAG_HAS_SEED, LIVENESS_EVERY, PeerGone, S, Segment, SpinBudget, STATE_CLOSING, W, waitFor,
} from "./shm";

function serve(config: WorkerConfig): void {
  const seg = Segment.open(config.segment);
  const w = config.worker;
  const lay = seg.lay;
  const at = lay.worker(w);
  const first = seg.word(at + W.firstSlot);
  const count = seg.word(at + W.numSlots);
  const seats = lay.spaces.numSeats;
  let envs: EnvBatch;
  try {
    const spec = resolveGame(config.game as GameRef);
    envs = new EnvBatch(spec, count, first, makeRunner(config.combat, spec.subSim, config.policy.timeoutS * 1000));
  } catch (err) {
    const e = err as Error;
    seg.setError(w, ErrorCode.INTERNAL, `env worker ${w} could not build its envs: ${e?.name ?? "Error"}: ${e?.message ?? e}`);
    throw err;
  }
  const slot0 = lay.slot(first);
  const sink: RecordSink = { buf: seg.buf, base: slot0 + lay.recordsOffset, envStride: lay.slotSize };
  const stepActions = new Int32Array(count);
  const multiActions = new Int32Array(count * seats);
  const addon = shmAddon();
  const alive = () => (seg.state === STATE_CLOSING ? "closing" : null);
  const budget = new SpinBudget();
  // Read before saying ready: a client may ring as soon as the pool is ready, and a ring that
  // came before this read would be taken for the old value and waited past for ever (the lost
  // first request; meeple's Python worker orders it the same way).
  let last = seg.word(at + W.doorbell);
  let lastCode = 0;
  seg.setWord(at + W.pid, process.pid); // ready: the worker threads share the server's pid
  parentPort?.postMessage("ready");
  for (let served = 1; ; served++) {
    let seq: number;
    try {
      const prev = last;
      seq = waitFor(seg, at + W.doorbell, at + W.workerSleeping, (v) => v !== prev, config.policy, budget, alive, Infinity);
    } catch (err) {
      if (err instanceof PeerGone) return;
      throw err;
    }
    last = seq;
    if (served % LIVENESS_EVERY === 0 && seg.state === STATE_CLOSING) return; // kept busy while closing
    let code = 0;
    let text = "";
    try {
      execute(seg.buf[slot0 + S.command], seg.buf[slot0 + S.flags]);
    } catch (err) {
      if (err instanceof ProtocolError) {
        code = err.code;
        text = err.message;
      } else {
        console.error(`meeple-node: worker ${w} failed: ${(err as Error)?.stack ?? err}`);
        code = ErrorCode.INTERNAL;
        text = `${(err as Error)?.name ?? "Error"}: ${(err as Error)?.message ?? err}`;
      }
    }
    if (code || lastCode) { // the common case (ok after ok) writes nothing here
      for (let i = 0; i < count; i++) seg.buf[lay.slot(first + i) + S.status] = code;
      seg.setError(w, code, text);
      lastCode = code;
    }
    for (let i = 0; i < count; i++) seg.setWord(lay.slot(first + i) + S.respSeq, seq);
    seg.buf.writeBigUInt64LE(BigInt(envs.steps), at + W.steps);
    seg.setWord(at + W.envErrors, envs.envErrors);
    addon.publish(seg.ab, at + W.done, seq, at + W.clientSleeping);
  }

  function execute(command: number, flags: number): void {
    switch (command) {
      case MsgType.STEP:
        for (let i = 0; i < count; i++) stepActions[i] = seg.i32[(lay.slot(first + i) + S.actions) >>> 2];
        envs.execute(command, stepActions, null, sink);
        return;
      case MsgType.STEP_MULTI:
        for (let i = 0; i < count; i++) {
          const a = (lay.slot(first + i) + S.actions) >>> 2;
          for (let k = 0; k < seats; k++) multiActions[i * seats + k] = seg.i32[a + k];
        }
        envs.execute(command, multiActions, null, sink);
        return;
      case MsgType.RESET:
        envs.execute(command, null, flags & FLAG_HAS_SEED ? seg.buf.readBigUInt64LE(slot0 + S.seed) : null, sink);
        return;
      case MsgType.OBSERVE:
        envs.execute(command, null, null, sink, (flags & FLAG_ALL_SEATS) !== 0);
        return;
      default:
        throw new ProtocolError(ErrorCode.UNKNOWN_TYPE,
          `slot command ${command} is not an env command; accepted: RESET(3), STEP(4), STEP_MULTI(5), OBSERVE(6)`);
    }
  }
}

const config = workerData as WorkerConfig;
try {
  serve(config);
} catch (err) {
  // a bug, not a bad request: say why in the worker block, and close the segment so no client
  // waits on a worker that is gone (the main thread then shuts the server down)
  try {
    const seg = Segment.open(config.segment);
    if (!seg.error(config.worker)[0]) seg.setError(config.worker, ErrorCode.INTERNAL, String((err as Error)?.message ?? err));
    seg.state = STATE_CLOSING;
  } catch {
    // the segment is gone too: the server is shutting down anyway
  }
  throw err;
}

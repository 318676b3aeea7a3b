// A batch of env slots of one game behind the protocol's env commands (docs/protocol.md section 3):
// action checks against the last masks, auto-reset, per-env seeds, contained env faults, and the
// records written straight into a caller's buffer (a reply body, or shared-memory slots).

import { Game, GameSpec, SubSimSpec } from "./game";
import { ErrorCode, Layout, layout, MsgType, ProtocolError, Spaces, writeScalar } from "./protocol";
import { SubSimRunner } from "./subsim";

/** The game's own simulator, one input at a time in this thread (``--combat local``). */
export function localRunner(sub: SubSimSpec): SubSimRunner {
  return { run: (inputs) => inputs.map((x) => sub.local(x)) };
}

export function spacesOf(spec: GameSpec, numEnvs: number): Spaces {
  return {
    numEnvs, numSeats: spec.numSeats, numActions: spec.numActions, obsDtype: "float32",
    obsShape: spec.obsShape, info: spec.info, envName: spec.name,
  };
}

/** Where records go: record ``k`` of env ``i`` (k = seat for per-seat replies) sits at
 *  ``base + i * envStride + k * recordSize`` of ``buf``. */
export interface RecordSink { buf: Buffer; base: number; envStride: number }

export class EnvBatch {
  readonly spaces: Spaces;
  readonly lay: Layout;
  games: Game[];
  steps = 0;
  envErrors = 0;
  private legal: Uint8Array | null = null; // [env, seat, action] masks of the last records
  private viewSeats: Int32Array; // the seat each env's last per-env record was for
  private obs: Float32Array;
  private mask: Uint8Array;
  private actions: Int32Array;
  private rewards: Float32Array; // one env's rewards, read before its auto-reset
  private twoPhase: boolean; // the game's step runs as stepBegin / sub-simulations / stepEnd
  private subInputs: Int32Array[] = [];
  private subCounts: Int32Array;

  /** ``firstEnv``: this batch's first env index in the server (env i is seeded with seed + i).
   *  ``runner``: where the game's sub-simulations run (GameSpec.subSim; default: in this thread). */
  constructor(readonly spec: GameSpec, numEnvs: number, readonly firstEnv = 0, readonly runner: SubSimRunner | null = null) {
    this.spaces = spacesOf(spec, numEnvs);
    this.lay = layout(this.spaces);
    this.games = Array.from({ length: numEnvs }, () => spec.create());
    this.viewSeats = new Int32Array(numEnvs);
    this.obs = new Float32Array(this.lay.obsCount);
    this.mask = new Uint8Array(spec.numActions);
    this.actions = new Int32Array(spec.numSeats);
    this.rewards = new Float32Array(spec.numSeats);
    const probe = this.games[0];
    this.twoPhase = spec.subSim !== undefined && typeof probe?.stepBegin === "function" && typeof probe?.stepEnd === "function";
    this.subCounts = new Int32Array(numEnvs);
    this.runner ??= this.twoPhase ? localRunner(spec.subSim as SubSimSpec) : null;
  }

  get numEnvs(): number {
    return this.games.length;
  }

  /** Records one request returns per env. */
  recordsPerEnv(command: MsgType, allSeats = false): number {
    return command === MsgType.STEP_MULTI || allSeats ? this.spec.numSeats : 1;
  }

  /** Run one env command; ``allSeats`` (OBSERVE): one record per seat, as STEP_MULTI. */
  execute(command: MsgType, actions: Int32Array | null, seed: bigint | null, sink: RecordSink, allSeats = false): void {
    if (command !== MsgType.RESET && this.legal === null) {
      throw new ProtocolError(ErrorCode.NOT_READY, `${MsgType[command]} before RESET; send RESET first`);
    }
    if (command === MsgType.STEP) this.checkStep(actions as Int32Array);
    if (command === MsgType.STEP_MULTI) this.checkMulti(actions as Int32Array);
    let env = 0;
    try {
      for (; env < this.games.length; env++) {
        if (command === MsgType.RESET) {
          this.games[env].reset(seed === null ? null : seed + BigInt(this.firstEnv + env));
        } else if (command === MsgType.STEP) {
          this.stepOne(env, (actions as Int32Array)[env]);
        } else if (command === MsgType.STEP_MULTI) {
          const seats = this.spec.numSeats;
          this.actions.set((actions as Int32Array).subarray(env * seats, (env + 1) * seats));
          this.advance(env);
        }
      }
      if (this.twoPhase && (command === MsgType.STEP || command === MsgType.STEP_MULTI)) this.finishSteps();
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      this.contain(env, err);
    }
    if (command === MsgType.STEP || command === MsgType.STEP_MULTI) this.steps += this.games.length;
    // Rewards of a finished episode are read before the auto-reset, so records are written
    // env by env with the reset in between.
    const perSeat = command === MsgType.STEP_MULTI || allSeats;
    for (let i = 0; i < this.games.length; i++) this.writeEnv(i, command, perSeat, sink);
  }

  private stepOne(env: number, action: number): void {
    const seat = this.viewSeats[env];
    this.actions.fill(0);
    this.actions[seat] = action;
    this.advance(env);
  }

  private advance(env: number): void {
    const game = this.games[env];
    if (!this.twoPhase) {
      game.step(this.actions);
      return;
    }
    if (env === 0) this.subInputs = [];
    const inputs = (game.stepBegin as (a: Int32Array) => Int32Array[])(this.actions);
    this.subCounts[env] = inputs.length;
    for (const x of inputs) this.subInputs.push(x);
  }

  /** Two-phase games: every env's sub-simulations in one batch, then each env's stepEnd. An error
   *  here (the batched simulator gone) is contained like an env's (``env`` = the batch's end). */
  private finishSteps(): void {
    const inputs = this.subInputs;
    this.subInputs = [];
    const results = inputs.length ? (this.runner as SubSimRunner).run(inputs) : [];
    if (results.length !== inputs.length) throw new Error(`the sub-simulator returned ${results.length} results for ${inputs.length} inputs`);
    let k = 0;
    for (let env = 0; env < this.games.length; env++) {
      const n = this.subCounts[env];
      (this.games[env].stepEnd as (r: Int32Array[]) => void)(results.slice(k, k + n));
      k += n;
    }
  }

  private writeEnv(env: number, command: MsgType, perSeat: boolean, sink: RecordSink): void {
    const game = this.games[env];
    const stepped = command === MsgType.STEP || command === MsgType.STEP_MULTI;
    const done = stepped && game.over ? 1 : 0;
    const truncated = done && game.truncated ? 1 : 0;
    const result = stepped && game.stepInfo ? game.stepInfo() : {};
    const mover = this.viewSeats[env];
    const seats = perSeat ? this.spec.numSeats : 1;
    const rewards = this.rewards;
    for (let k = 0; k < seats; k++) rewards[k] = stepped ? game.reward(perSeat ? k : mover) : 0;
    if (done) game.reset(null); // auto-reset: the record carries the next episode's start
    const info = { ...game.info(), ...result };
    this.viewSeats[env] = game.viewSeat();
    for (let k = 0; k < seats; k++) {
      const seat = perSeat ? k : this.viewSeats[env];
      const at = sink.base + env * sink.envStride + k * this.lay.recordSize;
      this.writeRecord(sink.buf, at, game, seat, rewards[k], done, truncated, info);
    }
    this.remember(env);
  }

  private writeRecord(buf: Buffer, at: number, game: Game, seat: number, reward: number, done: number,
    truncated: number, info: { [name: string]: number }): void {
    const lay = this.lay;
    buf.fill(0, at, at + lay.recordSize);
    buf.writeFloatLE(reward, at);
    buf[at + 4] = done;
    buf[at + 5] = truncated;
    for (const f of lay.info) writeScalar(buf, f.dtype, at + f.offset, info[f.name] ?? 0);
    this.obs.fill(0);
    game.writeObs(seat, this.obs);
    buf.set(new Uint8Array(this.obs.buffer), at + lay.obsOffset);
    this.mask.fill(0);
    if (game.toMove(seat)) game.writeMask(seat, this.mask);
    buf.set(this.mask, at + lay.maskOffset);
  }

  /** The masks the next request is checked against: every seat's, from the game itself. */
  private remember(env: number): void {
    const seats = this.spec.numSeats;
    const n = this.spec.numActions;
    this.legal ??= new Uint8Array(this.games.length * seats * n);
    const game = this.games[env];
    for (let seat = 0; seat < seats; seat++) {
      const row = this.legal.subarray((env * seats + seat) * n, (env * seats + seat + 1) * n);
      row.fill(0);
      if (game.toMove(seat)) game.writeMask(seat, row);
    }
  }

  private checkRange(actions: Int32Array): void {
    const n = this.spec.numActions;
    for (let i = 0; i < actions.length; i++) {
      if (actions[i] < 0 || actions[i] >= n) {
        throw new ProtocolError(ErrorCode.BAD_ACTION, `action ${actions[i]} at position ${i} is out of range; accepted 0..${n - 1}`);
      }
    }
  }

  private checkStep(actions: Int32Array): void {
    this.checkRange(actions);
    for (let env = 0; env < actions.length; env++) {
      const movers = this.movers(env);
      if (movers !== 1) {
        throw new ProtocolError(ErrorCode.BAD_ACTION,
          `env ${this.firstEnv + env} has ${movers} seats to move; STEP moves one seat, STEP_MULTI moves several`);
      }
      this.checkLegal(env, this.viewSeats[env], actions[env], false);
    }
  }

  /** Seats not to move may send anything in range (0 by convention); the others a legal action. */
  private checkMulti(actions: Int32Array): void {
    this.checkRange(actions);
    const seats = this.spec.numSeats;
    for (let env = 0; env < this.games.length; env++) {
      for (let seat = 0; seat < seats; seat++) {
        if (this.games[env].toMove(seat)) this.checkLegal(env, seat, actions[env * seats + seat], true);
      }
    }
  }

  private movers(env: number): number {
    let count = 0;
    for (let seat = 0; seat < this.spec.numSeats; seat++) count += this.games[env].toMove(seat) ? 1 : 0;
    return count;
  }

  private checkLegal(env: number, seat: number, action: number, nameSeat: boolean): void {
    const n = this.spec.numActions;
    const at = (env * this.spec.numSeats + seat) * n;
    const row = (this.legal as Uint8Array).subarray(at, at + n);
    if (row[action]) return;
    const allowed: number[] = [];
    row.forEach((v, k) => { if (v) allowed.push(k); });
    const where = `env ${this.firstEnv + env}${nameSeat ? ` seat ${seat}` : ""}`;
    throw new ProtocolError(ErrorCode.BAD_ACTION, `action ${action} is illegal for ${where}; legal actions: [${allowed.join(", ")}]`);
  }

  /** An env threw: log and count it, reset this batch (episodes restart), fail the request. */
  private contain(env: number, err: unknown): never {
    this.envErrors += 1;
    const who = env < this.games.length ? `env ${this.firstEnv + env}` : "the batched sub-simulation";
    console.error(`meeple-node: ${who} raised: ${(err as Error)?.stack ?? err}`);
    this.legal = null;
    try {
      for (let i = 0; i < this.games.length; i++) {
        this.games[i].reset(null);
        this.viewSeats[i] = this.games[i].viewSeat();
        this.remember(i);
      }
    } catch (again) {
      console.error(`meeple-node: the reset after the env error failed too: ${again}`);
      this.legal = null;
    }
    const last = this.firstEnv + this.games.length - 1;
    throw new ProtocolError(ErrorCode.ENV_EXCEPTION,
      `env slots ${this.firstEnv}..${last}${env < this.games.length ? "" : " (their batched sub-simulations)"} raised ${(err as Error)?.name ?? "Error"}: ${(err as Error)?.message ?? err}; they were reset (episodes restart)`);
  }
}

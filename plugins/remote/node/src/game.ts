// The interface a game implements to be served by the host library (envbatch.ts + server.ts):
// one instance per env, float32 observations and u8 masks written into arrays the host owns.

export interface GameSpec {
  name: string; // SPACES env name
  numSeats: number; // 1 for single-agent games
  numActions: number;
  obsShape: number[]; // float32 observation, C order
  info: Array<[string, string]>; // per-record info fields: [name, dtype]
  create(): Game;
  /** The game's batched sub-simulations (see Game.stepBegin), when it has them. */
  subSim?: SubSimSpec;
}

/** A sub-simulation a step may need several of (the auto-battler: its fights). Inputs and results
 *  are flat int32 arrays of fixed sizes, so a batch of them from every env of a worker can be run
 *  in one exchange by an outside simulator (server option --combat batched:PATH; docs/transport.md). */
export interface SubSimSpec {
  name: string; // what one is ("fights")
  inputInts: number; // int32s per input
  resultInts: number; // int32s per result
  /** The reference simulator, in this thread: one input -> its result (the input is not changed). */
  local(input: Int32Array): Int32Array;
}

export interface Game {
  /** Start an episode. ``seed`` (from RESET) reseeds the game's generator; null keeps it running. */
  reset(seed: bigint | null): void;
  /** The seat whose point of view STEP/RESET/OBSERVE records take (turn-based: the seat to move). */
  viewSeat(): number;
  /** Whether ``seat`` chooses an action in the next step (simultaneous games: several seats). */
  toMove(seat: number): boolean;
  /** Legal actions of ``seat`` into ``mask`` (already zeroed); nothing for a seat not to move. */
  writeMask(seat: number, mask: Uint8Array): void;
  /** ``seat``'s observation into ``obs`` (already zeroed). */
  writeObs(seat: number, obs: Float32Array): void;
  /** Info fields of the position a record shows (read after an auto-reset); missing ones are 0. */
  info(): { [name: string]: number };
  /** Info fields of the step just taken (read before an auto-reset); they override info()'s. */
  stepInfo?(): { [name: string]: number };
  /** One step: ``actions[seat]`` for every seat to move (others are ignored). */
  step(actions: Int32Array): void;
  /** Optional two-phase step around batched sub-simulations (GameSpec.subSim), used by the host
   *  instead of ``step`` when the game has both: ``stepBegin`` applies the actions and returns the
   *  sub-simulation inputs this step needs (each ``subSim.inputInts`` long; often none);
   *  ``stepEnd`` gets their results in the same order and finishes the step. The host runs the
   *  inputs of all its envs together (locally, or in one exchange with a batched simulator), so
   *  ``stepBegin`` then ``stepEnd`` with ``subSim.local``'s results must equal ``step`` exactly:
   *  draw every random number in the same order as ``step`` does. */
  stepBegin?(actions: Int32Array): Int32Array[];
  stepEnd?(results: Int32Array[]): void;
  /** ``seat``'s reward for the last step. */
  reward(seat: number): number;
  /** The episode ended at the last step; ``truncated``: by a time limit. */
  readonly over: boolean;
  readonly truncated: boolean;
}

/** xoshiro128** seeded through splitmix64: the same seed gives the same stream in every server. */
export class Rng {
  private s = new Uint32Array(4);

  constructor(seed: bigint = 0n) {
    this.seed(seed);
  }

  seed(seed: bigint): void {
    let x = BigInt.asUintN(64, seed);
    for (let i = 0; i < 2; i++) {
      x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n);
      let z = x;
      z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
      z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
      z ^= z >> 31n;
      this.s[2 * i] = Number(z & 0xffffffffn);
      this.s[2 * i + 1] = Number(z >> 32n);
    }
    if (!(this.s[0] | this.s[1] | this.s[2] | this.s[3])) this.s[0] = 1; // the all-zero state is a fixed point
  }

  /** A uniform uint32. */
  next(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** A uniform integer in [0, n) (n < 2^32; the modulo bias is below 2^-20 for the n used here). */
  below(n: number): number {
    return this.next() % n;
  }
}

const rotl = (x: number, k: number): number => ((x << k) | (x >>> (32 - k))) >>> 0;

// N Connect Four games behind the protocol's env commands, with the same validation and
// auto-reset contract as meeple's Python server (docs/protocol.md section 3).

import { Connect4, DRAW, HEIGHT, ONGOING, WIDTH } from "./connect4";
import { ErrorCode, ProtocolError, StepRecord, Spaces } from "./protocol";

export class Connect4Host {
  spaces: Spaces;
  games: Connect4[];
  steps = 0;
  envErrors = 0;
  private legal: number[][] | null = null; // [env][action], the mover's mask
  private legalMulti: number[][][] | null = null; // [env][seat][action]

  constructor(numEnvs: number) {
    this.spaces = {
      numEnvs, numSeats: 2, numActions: WIDTH, obsDtype: "float32", obsShape: [3, HEIGHT, WIDTH],
      info: [["to_play", "uint8"], ["moves", "uint8"], ["winner", "int8"]], envName: "connect4",
    };
    this.games = Array.from({ length: numEnvs }, () => new Connect4());
  }

  private record(game: Connect4, seat: number, reward: number, winner: number): StepRecord {
    return {
      reward, done: winner !== ONGOING ? 1 : 0, truncated: 0,
      info: { to_play: game.toPlay, moves: game.moves, winner },
      obs: game.encode(seat), mask: seat === game.toPlay ? game.legalMask() : new Array(WIDTH).fill(0),
    };
  }

  reset(): StepRecord[] {
    this.games = this.games.map(() => new Connect4()); // deterministic rules: nothing to seed
    return this.remember(this.games.map((g) => this.record(g, g.toPlay, 0, ONGOING)));
  }

  observe(): StepRecord[] {
    this.ready();
    return this.games.map((g) => this.record(g, g.toPlay, 0, ONGOING));
  }

  step(actions: number[]): StepRecord[] {
    this.ready();
    this.check(actions, this.legal as number[][]);
    const out = actions.map((a, i) => {
      let game = this.games[i];
      const mover = game.toPlay;
      game.play(a);
      let winner = ONGOING;
      let reward = 0;
      if (game.over) {
        winner = game.winner === null ? DRAW : game.winner;
        reward = game.winner === mover ? 1 : 0;
        game = this.games[i] = new Connect4();
      }
      return this.record(game, game.toPlay, reward, winner);
    });
    this.steps += actions.length;
    return this.remember(out);
  }

  stepMulti(actions: number[]): StepRecord[] {
    this.ready();
    const n = this.games.length;
    if (this.legalMulti) {
      for (let seat = 0; seat < 2; seat++) {
        const rows = [...Array(n).keys()].filter((i) => this.legalMulti![i][seat].some((v) => v));
        this.check(rows.map((i) => actions[2 * i + seat]), rows.map((i) => this.legalMulti![i][seat]), rows, seat);
      }
    } else {
      this.checkRange(actions);
    }
    const out: StepRecord[] = [];
    this.games.forEach((g, i) => {
      let game = g;
      game.play(actions[2 * i + game.toPlay]);
      let winner = ONGOING;
      if (game.over) {
        winner = game.winner === null ? DRAW : game.winner;
        game = this.games[i] = new Connect4();
      }
      for (let seat = 0; seat < 2; seat++) {
        const reward = winner === ONGOING || winner === DRAW ? 0 : winner === seat ? 1 : -1;
        out.push(this.record(game, seat, reward, winner));
      }
    });
    this.steps += n;
    this.legalMulti = Array.from({ length: n }, (_, i) => [out[2 * i].mask, out[2 * i + 1].mask]);
    this.legal = this.legalMulti.map(([a, b]) => a.map((v, k) => Math.max(v, b[k])));
    return out;
  }

  private remember(out: StepRecord[]): StepRecord[] {
    this.legal = out.map((r) => r.mask);
    this.legalMulti = null;
    return out;
  }

  private ready(): void {
    if (this.legal === null) throw new ProtocolError(ErrorCode.NOT_READY, "STEP before RESET; send RESET first");
  }

  private checkRange(actions: number[]): void {
    const bad = actions.findIndex((a) => a < 0 || a >= WIDTH);
    if (bad >= 0) {
      throw new ProtocolError(ErrorCode.BAD_ACTION,
        `action ${actions[bad]} at position ${bad} is out of range; accepted 0..${WIDTH - 1}`);
    }
  }

  private check(actions: number[], legal: number[][], rows?: number[], seat?: number): void {
    this.checkRange(actions);
    actions.forEach((a, i) => {
      if (!legal[i][a]) {
        const env = rows ? rows[i] : i;
        const allowed = legal[i].flatMap((v, k) => (v ? [k] : []));
        throw new ProtocolError(ErrorCode.BAD_ACTION,
          `action ${a} is illegal for env ${env}${seat === undefined ? "" : ` seat ${seat}`}; legal actions: [${allowed.join(", ")}]`);
      }
    });
  }
}

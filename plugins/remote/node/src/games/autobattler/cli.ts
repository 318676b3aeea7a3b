// The auto-battler from the command line: reference fights for the conformance test and the
// fights/s benchmark, and random self-play for game statistics.
//
//   node dist/games/autobattler/cli.js fights (--count N --seed S | --in BOARDS) --out DIR [--repeat R]
//       fights N random boards (or the int32 [N, 32, 9] fights in the file BOARDS, the input
//       layout of combat.ts); writes DIR/boards.bin (the input) and DIR/results.bin (int32 [N, 32 * 3 + 2]: final hp, row, col of each unit, winner, ticks),
//       and prints one JSON line with the reference's fights/s (best of R timed passes)
//   node dist/games/autobattler/cli.js play --games N --seed S
//       random legal play; prints one JSON line of game statistics
//   node dist/games/autobattler/cli.js layout
//       the observation and action layout as JSON (Python's scripted policy reads the same offsets)

import * as fs from "fs";
import * as path from "path";
import { Rng } from "../../game";
import { FIGHT_UNITS, F_COL, F_HP, F_ROW, fight, UNIT_FIELDS } from "./combat";
import * as G from "./game";
import { AutoBattler, BOARD, fightInput, NUM_ACTIONS, PLAYERS, Unit } from "./game";
import { MAX_STAR, NUM_KINDS } from "./units";

function options(argv: string[]): { [k: string]: string } {
  const out: { [k: string]: string } = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) throw new Error(`expected --key value pairs, got ${argv.slice(i).join(" ")}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}

/** A random board: 1..16 units of random kinds and stars on random cells. */
function randomBoard(rng: Rng): Array<Unit | null> {
  const board: Array<Unit | null> = new Array(BOARD).fill(null);
  const count = 1 + rng.below(BOARD);
  for (let k = 0; k < count; k++) board[rng.below(BOARD)] = { kind: rng.below(NUM_KINDS), star: 1 + rng.below(MAX_STAR) };
  return board;
}

function fights(opts: { [k: string]: string }): void {
  const stride = FIGHT_UNITS * UNIT_FIELDS;
  let boards: Int32Array;
  if (opts.in) {
    const raw = fs.readFileSync(opts.in);
    if (raw.length % (4 * stride)) throw new Error(`${opts.in} is ${raw.length} bytes; expected a multiple of ${4 * stride} (int32 [N, 32, 9])`);
    boards = new Int32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
  } else {
    const rng = new Rng(BigInt(opts.seed ?? 0));
    boards = new Int32Array(Number(opts.count ?? 1000) * stride);
    for (let at = 0; at < boards.length; at += stride) boards.set(fightInput(randomBoard(rng), randomBoard(rng)), at);
  }
  const count = boards.length / stride;
  const resultWidth = FIGHT_UNITS * 3 + 2;
  const results = new Int32Array(count * resultWidth);
  let best = Infinity;
  let ticks = 0;
  for (let r = 0; r < Number(opts.repeat ?? 1); r++) {
    const work = boards.slice();
    const start = process.hrtime.bigint();
    ticks = 0;
    for (let f = 0; f < count; f++) {
      const units = work.subarray(f * stride, (f + 1) * stride);
      const out = fight(units);
      ticks += out.ticks;
      const at = f * resultWidth;
      for (let u = 0; u < FIGHT_UNITS; u++) {
        results[at + u] = units[u * UNIT_FIELDS + F_HP];
        results[at + FIGHT_UNITS + u] = units[u * UNIT_FIELDS + F_ROW];
        results[at + 2 * FIGHT_UNITS + u] = units[u * UNIT_FIELDS + F_COL];
      }
      results[at + 3 * FIGHT_UNITS] = out.winner;
      results[at + 3 * FIGHT_UNITS + 1] = out.ticks;
    }
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  if (opts.out) {
    fs.mkdirSync(opts.out, { recursive: true });
    fs.writeFileSync(path.join(opts.out, "boards.bin"), Buffer.from(boards.buffer));
    fs.writeFileSync(path.join(opts.out, "results.bin"), Buffer.from(results.buffer));
  }
  console.log(JSON.stringify({ fights: count, seconds: best, fights_per_s: count / best, mean_ticks: ticks / count }));
}

function play(opts: { [k: string]: string }): void {
  const games = Number(opts.games ?? 10);
  const rng = new Rng(BigInt(opts.seed ?? 0));
  const game = new AutoBattler();
  const mask = new Uint8Array(NUM_ACTIONS);
  const actions = new Int32Array(PLAYERS);
  let steps = 0;
  let rounds = 0;
  const start = process.hrtime.bigint();
  for (let g = 0; g < games; g++) {
    game.reset(BigInt(opts.seed ?? 0) + BigInt(g));
    while (!game.over) {
      for (let seat = 0; seat < PLAYERS; seat++) {
        if (!game.toMove(seat)) continue;
        mask.fill(0);
        game.writeMask(seat, mask);
        const legal = [...mask.keys()].filter((a) => mask[a]);
        actions[seat] = legal[rng.below(legal.length)];
      }
      game.step(actions);
      steps++;
    }
    rounds += game.round;
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ games, steps_per_game: steps / games, rounds_per_game: rounds / games, steps_per_s: steps / seconds }));
}

function layout(): void {
  const names = ["BOARD", "BENCH", "SHOP", "PLAYERS", "UNIT_FEATURES", "O_UNITS", "O_SELF", "O_TYPES", "O_POOL", "O_OPPONENTS",
    "OPPONENT_FEATURES", "O_FIGHT", "OBS_SIZE", "A_END", "A_REROLL", "A_XP", "A_BUY", "A_SELL_BENCH", "A_SELL_BOARD", "A_SWAP",
    "NUM_ACTIONS", "START_HP", "MAX_LEVEL", "XP_COST", "REROLL_COST"] as const;
  const table = G as unknown as { [k: string]: number };
  console.log(JSON.stringify(Object.fromEntries(names.map((n) => [n, table[n]]))));
}

const [command, ...rest] = process.argv.slice(2);
const run = { fights, play, layout }[command as "fights" | "play" | "layout"];
if (!run) {
  console.error("usage: cli.js fights (--count N --seed S | --in FILE) --out DIR [--repeat R] | play --games N --seed S | layout");
  process.exit(2);
}
run(options(rest));

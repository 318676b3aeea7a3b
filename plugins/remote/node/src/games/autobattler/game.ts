// A compact 8-player auto-battler (docs/autobattler.md): every living player shops and places
// units at the same time (one STEP_MULTI = one action per player to move); when all have ended
// their turn, players fight in random pairs, losers lose health, and the last player standing wins.
// Rewards come from placement: +1 for first place down to -1 for eighth, when the place is decided.

import { Game, GameSpec, Rng, SubSimSpec } from "../../game";
import { DRAW, FIGHT_UNITS, F_HP, fight, SIDE_UNITS, square, UNIT_FIELDS, WIN_A } from "./combat";
import { MAX_STAR, NUM_KINDS, NUM_TYPES, POOL_COPIES, statsOf, UNITS } from "./units";

export const PLAYERS = 8;
export const BOARD = 16; // board cells (2 rows x 8)
export const BENCH = 4;
export const SHOP = 5;
export const START_HP = 40;
export const MAX_LEVEL = 8;
export const XP_TO_NEXT = [0, 2, 4, 8, 12, 20, 32, 48]; // from level L to L+1 (index L)
export const ACTIONS_PER_TURN = 10; // the turn ends by itself after this many actions
export const MAX_ROUNDS = 30;
export const REROLL_COST = 2;
export const XP_COST = 4;
export const XP_BUY = 4;
// Shop odds in percent of tiers 1/2/3 by level.
export const SHOP_ODDS = [[0, 0, 0], [100, 0, 0], [100, 0, 0], [75, 25, 0], [55, 35, 10], [45, 40, 15], [30, 45, 25], [20, 45, 35], [15, 40, 45]];

// Actions (92): end turn, reroll, buy XP, buy shop slot s, sell bench slot b, sell board cell c,
// exchange bench slot b with board cell c (moves a unit either way, or swaps two).
export const A_END = 0, A_REROLL = 1, A_XP = 2, A_BUY = 3, A_SELL_BENCH = A_BUY + SHOP, A_SELL_BOARD = A_SELL_BENCH + BENCH;
export const A_SWAP = A_SELL_BOARD + BOARD;
export const NUM_ACTIONS = A_SWAP + BENCH * BOARD;

// Observation (612 float32), from the observer's seat (docs/autobattler.md, "Observation").
export const UNIT_FEATURES = 1 + NUM_KINDS + MAX_STAR; // present, kind one-hot, star one-hot
export const O_UNITS = 0; // board, bench, shop
export const O_SELF = O_UNITS + (BOARD + BENCH + SHOP) * UNIT_FEATURES;
export const SELF_FEATURES = 16;
export const O_TYPES = O_SELF + SELF_FEATURES;
export const O_POOL = O_TYPES + NUM_TYPES;
export const O_OPPONENTS = O_POOL + NUM_KINDS;
export const OPPONENT_FEATURES = 8 + NUM_KINDS + NUM_TYPES;
export const O_FIGHT = O_OPPONENTS + (PLAYERS - 1) * OPPONENT_FEATURES;
export const FIGHT_FEATURES = 5 + PLAYERS - 1;
export const OBS_SIZE = O_FIGHT + FIGHT_FEATURES;

export interface Unit { kind: number; star: number }
type Slot = Unit | null;

export class Player {
  hp = START_HP;
  gold = 0;
  level = 1;
  xp = 0;
  board: Slot[] = new Array(BOARD).fill(null);
  bench: Slot[] = new Array(BENCH).fill(null);
  shop: number[] = new Array(SHOP).fill(-1); // kinds, -1 empty
  actions = 0; // this turn's
  ended = false;
  place = 0; // 1..8 once decided
  // the last fight, from this player's side
  lastResult = -1; // -1 none, 0 lost, 1 won, 2 draw
  lastTaken = 0;
  lastDealt = 0;
  lastOpponent = -1;
  lastGhost = false;
  lastSurvivors = 0;

  get alive(): boolean {
    return this.place === 0;
  }

  boardCount(): number {
    return this.board.reduce((n, u) => n + (u ? 1 : 0), 0);
  }
}

export class AutoBattler implements Game {
  players: Player[] = [];
  pool = new Int32Array(NUM_KINDS);
  round = 0;
  rng = new Rng(0n);
  private rewards = new Float32Array(PLAYERS);
  private done = false;
  private fights: Array<[number, number, boolean]> = []; // this step's pairings: a, b, ghost
  private fighting = false; // stepBegin started a combat round that stepEnd finishes

  reset(seed: bigint | null): void {
    if (seed !== null) this.rng.seed(seed);
    this.players = Array.from({ length: PLAYERS }, () => new Player());
    UNITS.forEach((u, k) => { this.pool[k] = POOL_COPIES[u.tier]; });
    this.round = 0;
    this.done = false;
    this.rewards.fill(0);
    this.fights = [];
    this.fighting = false; // a step whose fights failed (the env was reset) is dropped
    this.startRound();
  }

  viewSeat(): number {
    return 0;
  }

  toMove(seat: number): boolean {
    const p = this.players[seat];
    return !this.done && p.alive && !p.ended;
  }

  get over(): boolean {
    return this.done;
  }

  readonly truncated = false;

  reward(seat: number): number {
    return this.rewards[seat];
  }

  info(): { [name: string]: number } {
    return { round: this.round, alive: this.players.filter((p) => p.alive).length };
  }

  stepInfo(): { [name: string]: number } {
    return { winner: this.done ? this.players.findIndex((p) => p.place === 1) : -1 };
  }

  // -- actions --

  writeMask(seat: number, mask: Uint8Array): void {
    const p = this.players[seat];
    mask[A_END] = 1;
    mask[A_REROLL] = p.gold >= REROLL_COST ? 1 : 0;
    mask[A_XP] = p.gold >= XP_COST && p.level < MAX_LEVEL ? 1 : 0;
    const benchFree = p.bench.some((u) => u === null);
    for (let s = 0; s < SHOP; s++) {
      const kind = p.shop[s];
      mask[A_BUY + s] = kind >= 0 && p.gold >= UNITS[kind].tier && benchFree ? 1 : 0;
    }
    for (let b = 0; b < BENCH; b++) mask[A_SELL_BENCH + b] = p.bench[b] ? 1 : 0;
    for (let c = 0; c < BOARD; c++) mask[A_SELL_BOARD + c] = p.board[c] ? 1 : 0;
    const full = p.boardCount() >= p.level;
    for (let b = 0; b < BENCH; b++) {
      for (let c = 0; c < BOARD; c++) {
        const [fromBench, onBoard] = [p.bench[b] !== null, p.board[c] !== null];
        // a unit may join the board only below the level's cap
        mask[A_SWAP + b * BOARD + c] = onBoard || (fromBench && !full) ? 1 : 0;
      }
    }
  }

  step(actions: Int32Array): void {
    this.stepEnd(this.stepBegin(actions).map(fightResult));
  }

  /** The actions; when every living player has ended its turn, the combat round's pairings and
   *  its fights' inputs (combat.ts layout), else none. */
  stepBegin(actions: Int32Array): Int32Array[] {
    this.rewards.fill(0);
    for (let seat = 0; seat < PLAYERS; seat++) {
      if (this.toMove(seat)) this.act(this.players[seat], actions[seat]);
    }
    this.fights = [];
    this.fighting = this.players.every((p) => !p.alive || p.ended);
    if (this.fighting) this.pairUp();
    return this.fights.map(([a, b]) => fightInput(this.players[a].board, this.players[b].board));
  }

  /** The fights' results (``fightResult`` layout), in stepBegin's order: health, placements, and
   *  the next round. */
  stepEnd(results: Int32Array[]): void {
    if (!this.fighting) return;
    if (results.length !== this.fights.length) throw new Error(`${results.length} fight results for ${this.fights.length} fights`);
    this.fights.forEach(([a, b, ghost], k) => this.resolve(a, b, ghost, results[k]));
    this.fighting = false;
    this.fights = [];
    this.eliminate();
    if (!this.done) this.startRound();
  }

  private act(p: Player, a: number): void {
    p.actions += 1;
    if (a === A_END) p.ended = true;
    else if (a === A_REROLL) {
      p.gold -= REROLL_COST;
      this.refreshShop(p);
    } else if (a === A_XP) {
      p.gold -= XP_COST;
      this.gainXp(p, XP_BUY);
    } else if (a < A_SELL_BENCH) this.buy(p, a - A_BUY);
    else if (a < A_SELL_BOARD) p.bench[a - A_SELL_BENCH] = this.sell(p, p.bench[a - A_SELL_BENCH]);
    else if (a < A_SWAP) p.board[a - A_SELL_BOARD] = this.sell(p, p.board[a - A_SELL_BOARD]);
    else {
      const b = Math.floor((a - A_SWAP) / BOARD);
      const c = (a - A_SWAP) % BOARD;
      [p.bench[b], p.board[c]] = [p.board[c], p.bench[b]];
    }
    if (p.actions >= ACTIONS_PER_TURN) p.ended = true;
  }

  private buy(p: Player, s: number): void {
    const kind = p.shop[s];
    p.gold -= UNITS[kind].tier;
    p.shop[s] = -1;
    p.bench[p.bench.indexOf(null)] = { kind, star: 1 };
    this.merge(p, kind, 1);
  }

  /** Three copies of a kind at one star become one at the next star (on the board if one was). */
  private merge(p: Player, kind: number, star: number): void {
    if (star >= MAX_STAR) return;
    const same = (u: Slot) => u !== null && u.kind === kind && u.star === star;
    const onBoard = p.board.flatMap((u, c) => (same(u) ? [c] : []));
    const onBench = p.bench.flatMap((u, b) => (same(u) ? [b] : []));
    if (onBoard.length + onBench.length < 3) return;
    const keepBoard = onBoard.length > 0;
    let removed = 0;
    for (const c of onBoard.slice(keepBoard ? 1 : 0)) if (removed < 2) { p.board[c] = null; removed++; }
    for (const b of onBench.slice(keepBoard ? 0 : 1)) if (removed < 2) { p.bench[b] = null; removed++; }
    if (keepBoard) p.board[onBoard[0]] = { kind, star: star + 1 };
    else p.bench[onBench[0]] = { kind, star: star + 1 };
    this.merge(p, kind, star + 1);
  }

  /** Gold back (tier x 3^(star-1)) and the copies back to the pool; returns the emptied slot. */
  private sell(p: Player, u: Slot): Slot {
    const unit = u as Unit;
    const copies = 3 ** (unit.star - 1);
    p.gold += UNITS[unit.kind].tier * copies;
    this.pool[unit.kind] += copies;
    return null;
  }

  private gainXp(p: Player, xp: number): void {
    p.xp += xp;
    while (p.level < MAX_LEVEL && p.xp >= XP_TO_NEXT[p.level]) {
      p.xp -= XP_TO_NEXT[p.level];
      p.level += 1;
    }
    if (p.level === MAX_LEVEL) p.xp = 0;
  }

  // -- rounds --

  private startRound(): void {
    this.round += 1;
    for (const p of this.players) {
      if (!p.alive) continue;
      p.gold += 5 + Math.min(5, Math.floor(p.gold / 10)) + (p.lastResult === 1 ? 1 : 0);
      if (this.round > 1) this.gainXp(p, 2);
      p.actions = 0;
      p.ended = false;
      this.refreshShop(p);
    }
  }

  private refreshShop(p: Player): void {
    for (let s = 0; s < SHOP; s++) {
      if (p.shop[s] >= 0) this.pool[p.shop[s]] += 1;
      p.shop[s] = this.draw(p.level);
    }
  }

  /** A kind from the shared pool: the tier by the level's odds, the kind by copies left. */
  private draw(level: number): number {
    const roll = this.rng.below(100);
    let tier = 1;
    for (let acc = SHOP_ODDS[level][0]; roll >= acc && tier < 3; tier++) acc += SHOP_ODDS[level][tier];
    for (let t = tier; t >= 1; t--) { // an empty tier falls back to the one below
      const kinds = UNITS.flatMap((u, k) => (u.tier === t ? [k] : []));
      const total = kinds.reduce((n, k) => n + this.pool[k], 0);
      if (total === 0) continue;
      let pick = this.rng.below(total);
      for (const k of kinds) {
        if (pick < this.pool[k]) { this.pool[k] -= 1; return k; }
        pick -= this.pool[k];
      }
    }
    return -1;
  }

  /** Living players shuffled into pairs (the game's generator: the shuffle, then the ghost's pick). */
  private pairUp(): void {
    const alive = this.players.flatMap((p, i) => (p.alive ? [i] : []));
    for (let i = alive.length - 1; i > 0; i--) { // Fisher-Yates with the game's generator
      const j = this.rng.below(i + 1);
      [alive[i], alive[j]] = [alive[j], alive[i]];
    }
    for (let k = 0; k + 1 < alive.length; k += 2) this.fights.push([alive[k], alive[k + 1], false]);
    if (alive.length % 2) { // the odd one out fights a copy of another living player's board
      const others = alive.slice(0, -1);
      this.fights.push([alive[alive.length - 1], others[this.rng.below(others.length)], true]);
    }
  }

  /** One fight's outcome; with ``ghost`` only ``a`` is affected (``b``'s board is a copy). */
  private resolve(a: number, b: number, ghost: boolean, result: Int32Array): void {
    const [pa, pb] = [this.players[a], this.players[b]];
    const winner = result[0];
    const survivors = (side: number) => {
      let tiers = 0;
      let count = 0;
      const board = side === 0 ? pa.board : pb.board;
      for (let c = 0; c < BOARD; c++) {
        if (result[1 + side * SIDE_UNITS + c] > 0) { tiers += UNITS[(board[c] as Unit).kind].tier; count++; }
      }
      return { tiers, count };
    };
    const [sa, sb] = [survivors(0), survivors(1)];
    // the loser loses 2 + the tiers of the winner's survivors; a draw costs both 2
    const lossA = winner === DRAW ? 2 : winner === WIN_A ? 0 : 2 + sb.tiers;
    const lossB = winner === DRAW ? 2 : winner === WIN_A ? 2 + sa.tiers : 0;
    const record = (p: Player, result: number, taken: number, dealt: number, opp: number, surv: number) => {
      p.lastResult = result; p.lastTaken = taken; p.lastDealt = dealt; p.lastOpponent = opp; p.lastGhost = ghost; p.lastSurvivors = surv;
    };
    pa.hp -= lossA;
    record(pa, winner === DRAW ? 2 : winner === WIN_A ? 1 : 0, lossA, lossB, b, sa.count);
    if (!ghost) {
      pb.hp -= lossB;
      record(pb, winner === DRAW ? 2 : winner === WIN_A ? 0 : 1, lossB, lossA, a, sb.count);
    }
  }

  /** Players at 0 health leave (the healthier place higher, then the lower seat); their units
   *  go back to the pool. The game ends with one player left or after MAX_ROUNDS. */
  private eliminate(): void {
    const alive = () => this.players.flatMap((p, i) => (p.alive ? [i] : []));
    const byHealth = (xs: number[]) => xs.sort((i, j) => this.players[j].hp - this.players[i].hp || i - j);
    const out = byHealth(alive().filter((i) => this.players[i].hp <= 0));
    let next = alive().length;
    for (const i of out.reverse()) this.placeAt(i, next--);
    const left = alive();
    if (left.length <= 1 || this.round >= MAX_ROUNDS) {
      byHealth(left).forEach((i, rank) => this.placeAt(i, rank + 1));
      this.done = true;
    }
  }

  private placeAt(seat: number, place: number): void {
    const p = this.players[seat];
    p.place = place;
    this.rewards[seat] = (PLAYERS + 1 - 2 * place) / (PLAYERS - 1); // +1 first .. -1 last
    for (const u of [...p.board, ...p.bench]) if (u) this.pool[u.kind] += 3 ** (u.star - 1);
    for (const k of p.shop) if (k >= 0) this.pool[k] += 1;
    p.board.fill(null);
    p.bench.fill(null);
    p.shop.fill(-1);
  }

  // -- observation --

  writeObs(seat: number, obs: Float32Array): void {
    const p = this.players[seat];
    const unit = (slot: number, kind: number, star: number) => {
      const at = O_UNITS + slot * UNIT_FEATURES;
      obs[at] = 1;
      obs[at + 1 + kind] = 1;
      obs[at + 1 + NUM_KINDS + star - 1] = 1;
    };
    p.board.forEach((u, c) => u && unit(c, u.kind, u.star));
    p.bench.forEach((u, b) => u && unit(BOARD + b, u.kind, u.star));
    p.shop.forEach((k, s) => k >= 0 && unit(BOARD + BENCH + s, k, 1));
    const alive = this.players.filter((q) => q.alive).length;
    const self = [
      p.hp / START_HP, p.gold / 50, p.level / MAX_LEVEL, p.level < MAX_LEVEL ? p.xp / XP_TO_NEXT[p.level] : 0,
      this.round / MAX_ROUNDS, alive / PLAYERS, p.actions / ACTIONS_PER_TURN, p.ended ? 1 : 0,
      p.boardCount() / BOARD, (p.level - p.boardCount()) / MAX_LEVEL, p.bench.filter((u) => u).length / BENCH,
      Math.min(5, Math.floor(p.gold / 10)) / 5, p.gold >= REROLL_COST ? 1 : 0, p.gold >= XP_COST ? 1 : 0,
      p.lastResult === 1 ? 1 : 0, p.lastResult === 0 ? 1 : 0,
    ];
    obs.set(self, O_SELF);
    typeCounts(p.board, obs, O_TYPES);
    UNITS.forEach((u, k) => { obs[O_POOL + k] = this.pool[k] / POOL_COPIES[u.tier]; });
    for (let k = 1; k < PLAYERS; k++) {
      const q = this.players[(seat + k) % PLAYERS];
      const at = O_OPPONENTS + (k - 1) * OPPONENT_FEATURES;
      const stars = q.board.reduce((n, u) => n + (u ? u.star : 0), 0);
      obs.set([q.alive ? 1 : 0, Math.max(0, q.hp) / START_HP, q.level / MAX_LEVEL, q.gold / 50, q.boardCount() / BOARD,
        q.ended ? 1 : 0, stars / (2 * BOARD), q.place / PLAYERS], at);
      for (const u of q.board) if (u) obs[at + 8 + u.kind] += 0.25;
      typeCounts(q.board, obs, at + 8 + NUM_KINDS);
    }
    obs.set([p.lastResult === 2 ? 1 : 0, p.lastTaken / 20, p.lastDealt / 20, p.lastGhost ? 1 : 0, p.lastSurvivors / BOARD], O_FIGHT);
    if (p.lastOpponent >= 0) obs[O_FIGHT + 5 + (p.lastOpponent - seat + PLAYERS) % PLAYERS - 1] = 1;
  }
}

function typeCounts(board: Slot[], obs: Float32Array, at: number): void {
  for (const u of board) if (u) obs[at + UNITS[u.kind].type] += 1 / 8;
}

/** The combat simulator's input for board ``a`` (side A) against board ``b`` (side B). */
export function fightInput(a: Slot[], b: Slot[]): Int32Array {
  const units = new Int32Array(FIGHT_UNITS * UNIT_FIELDS);
  [a, b].forEach((board, side) => board.forEach((u, cell) => {
    if (!u) return;
    const s = statsOf(u.kind, u.star);
    const [row, col] = square(side, cell);
    units.set([1, row, col, s.hp, s.atk, s.def, s.speed, s.range, s.type], (side * SIDE_UNITS + cell) * UNIT_FIELDS);
  }));
  return units;
}

/** A fight's result: [winner (WIN_A, WIN_B, DRAW), final hp of units 0..31 (0: dead or absent)];
 *  the reply layout of the batched combat service (docs/protocol.md, FIGHTS). */
export const FIGHT_RESULT_INTS = 1 + FIGHT_UNITS;

/** ``fight`` (combat.ts) on a copy of ``input``, as a result. */
export function fightResult(input: Int32Array): Int32Array {
  const units = input.slice();
  const out = new Int32Array(FIGHT_RESULT_INTS);
  out[0] = fight(units).winner;
  for (let u = 0; u < FIGHT_UNITS; u++) out[1 + u] = units[u * UNIT_FIELDS + F_HP];
  return out;
}

export const fights: SubSimSpec = {
  name: "fights", inputInts: FIGHT_UNITS * UNIT_FIELDS, resultInts: FIGHT_RESULT_INTS, local: fightResult,
};

export const autobattler: GameSpec = {
  name: "autobattler", numSeats: PLAYERS, numActions: NUM_ACTIONS, obsShape: [OBS_SIZE],
  info: [["round", "uint8"], ["alive", "uint8"], ["winner", "int8"]],
  create: () => new AutoBattler(), subSim: fights,
};

if (NUM_ACTIONS !== 92 || OBS_SIZE !== 612) throw new Error(`auto-battler layout drifted: ${NUM_ACTIONS} actions, ${OBS_SIZE} floats`);

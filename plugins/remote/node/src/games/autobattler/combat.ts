// The auto-battler's fight: a deterministic, integer-only simulation on a 6 x 8 grid, with
// simultaneous semantics inside a tick (every decision reads the tick's starting state), so the
// same rules run as one batched tensor program over (fights x units) in meeple_autobattler.combat.
// Rules: docs/autobattler.md, "Combat".

import { typeMultiplier4 } from "./units";

export const GRID_ROWS = 6;
export const GRID_COLS = 8;
export const SIDE_UNITS = 16; // board cells per side: units 0..15 are side A, 16..31 side B
export const FIGHT_UNITS = 2 * SIDE_UNITS;
export const MAX_TICKS = 200;
export const ACTION_COST = 100;

// One fight is FIGHT_UNITS rows of these int32 fields (the batched simulator's input layout).
export const F_ALIVE = 0, F_ROW = 1, F_COL = 2, F_HP = 3, F_ATK = 4, F_DEF = 5, F_SPEED = 6, F_RANGE = 7, F_TYPE = 8;
export const UNIT_FIELDS = 9;

export const WIN_A = 0, WIN_B = 1, DRAW = 2;

/** Grid square of board cell ``cell`` (0..15: row cell/8, 0 = front) for side 0 (bottom) or 1 (top,
 *  mirrored), with two empty rows between the sides. */
export function square(side: number, cell: number): [number, number] {
  const depth = cell >> 3;
  const col = cell & 7;
  return side === 0 ? [4 + depth, col] : [1 - depth, GRID_COLS - 1 - col];
}

/** Simulate one fight in place (``units``: FIELDS x FIGHT_UNITS int32; hp and position end as
 *  the fight left them). Returns the winner (WIN_A, WIN_B or DRAW) and the ticks it took. */
export function fight(units: Int32Array): { winner: number; ticks: number } {
  const n = FIGHT_UNITS;
  const energy = new Int32Array(n);
  const damage = new Int32Array(n);
  const dest = new Int32Array(n);
  const act = new Uint8Array(n); // 0 nothing, 1 attack, 2 move
  const at = (u: number, f: number) => units[u * UNIT_FIELDS + f];
  let ticks = 0;
  while (ticks < MAX_TICKS && sideAlive(units, 0) && sideAlive(units, 1)) {
    ticks += 1;
    damage.fill(0);
    act.fill(0);
    for (let u = 0; u < n; u++) {
      if (!at(u, F_ALIVE)) continue;
      energy[u] += at(u, F_SPEED);
      // nearest living enemy by Chebyshev distance, the lowest index on a tie
      let best = -1;
      let bestDist = 0;
      const enemyFirst = u < SIDE_UNITS ? SIDE_UNITS : 0;
      for (let v = enemyFirst; v < enemyFirst + SIDE_UNITS; v++) {
        if (!at(v, F_ALIVE)) continue;
        const d = Math.max(Math.abs(at(u, F_ROW) - at(v, F_ROW)), Math.abs(at(u, F_COL) - at(v, F_COL)));
        if (best < 0 || d < bestDist) { best = v; bestDist = d; }
      }
      if (best < 0 || energy[u] < ACTION_COST) continue;
      if (bestDist <= at(u, F_RANGE)) {
        act[u] = 1;
        const raw = Math.floor((at(u, F_ATK) * typeMultiplier4(at(u, F_TYPE), at(best, F_TYPE))) / 4) - at(best, F_DEF);
        damage[best] += Math.max(1, raw);
      } else {
        act[u] = 2;
        const r = at(u, F_ROW) + Math.sign(at(best, F_ROW) - at(u, F_ROW));
        const c = at(u, F_COL) + Math.sign(at(best, F_COL) - at(u, F_COL));
        dest[u] = r * GRID_COLS + c;
      }
    }
    // a step lands only on a square free at the tick's start and claimed by no lower-index mover
    for (let u = 0; u < n; u++) {
      if (act[u] !== 2) continue;
      let blocked = false;
      for (let v = 0; v < n && !blocked; v++) {
        if (at(v, F_ALIVE) && at(v, F_ROW) * GRID_COLS + at(v, F_COL) === dest[u]) blocked = true;
        if (v < u && act[v] === 2 && dest[v] === dest[u]) blocked = true;
      }
      if (blocked) act[u] = 0;
    }
    for (let u = 0; u < n; u++) {
      if (act[u] === 2) {
        units[u * UNIT_FIELDS + F_ROW] = Math.floor(dest[u] / GRID_COLS);
        units[u * UNIT_FIELDS + F_COL] = dest[u] % GRID_COLS;
      }
      if (act[u]) energy[u] -= ACTION_COST;
    }
    for (let u = 0; u < n; u++) {
      if (!at(u, F_ALIVE) || !damage[u]) continue;
      const hp = at(u, F_HP) - damage[u];
      units[u * UNIT_FIELDS + F_HP] = Math.max(0, hp);
      if (hp <= 0) units[u * UNIT_FIELDS + F_ALIVE] = 0;
    }
  }
  const a = sideAlive(units, 0);
  const b = sideAlive(units, 1);
  return { winner: a && !b ? WIN_A : b && !a ? WIN_B : DRAW, ticks };
}

export function sideAlive(units: Int32Array, side: number): boolean {
  for (let u = side * SIDE_UNITS; u < (side + 1) * SIDE_UNITS; u++) if (units[u * UNIT_FIELDS + F_ALIVE]) return true;
  return false;
}

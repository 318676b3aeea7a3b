// The auto-battler's units and type chart (docs/autobattler.md, "Units"). All combat arithmetic is
// on integers, so the TypeScript fight and the batched tensor fight agree exactly.

export const NUM_TYPES = 4; // 0 Ember, 1 Tide, 2 Stone, 3 Gale
export const TYPE_NAMES = ["ember", "tide", "stone", "gale"];

/** Damage multiplier x4 of an attacker type on a defender type: each type beats the one before it
 *  (Tide > Ember > Gale > Stone > Tide): 5 (x1.25) with the advantage, 3 (x0.75) against it. */
export function typeMultiplier4(attacker: number, defender: number): number {
  if ((attacker + NUM_TYPES - 1) % NUM_TYPES === defender) return 5;
  if ((defender + NUM_TYPES - 1) % NUM_TYPES === attacker) return 3;
  return 4;
}

export interface UnitKind { name: string; type: number; tier: number; hp: number; atk: number; def: number; speed: number; range: number }

// tier = kind / 4 + 1, type = kind % 4; speed is energy per tick (an action costs 100).
export const UNITS: UnitKind[] = [
  { name: "ember scout", type: 0, tier: 1, hp: 60, atk: 14, def: 2, speed: 30, range: 1 },
  { name: "tide archer", type: 1, tier: 1, hp: 45, atk: 11, def: 1, speed: 25, range: 3 },
  { name: "stone guard", type: 2, tier: 1, hp: 90, atk: 8, def: 5, speed: 20, range: 1 },
  { name: "gale runner", type: 3, tier: 1, hp: 50, atk: 10, def: 2, speed: 40, range: 1 },
  { name: "ember mage", type: 0, tier: 2, hp: 65, atk: 20, def: 2, speed: 25, range: 3 },
  { name: "tide knight", type: 1, tier: 2, hp: 110, atk: 14, def: 5, speed: 25, range: 1 },
  { name: "stone golem", type: 2, tier: 2, hp: 150, atk: 12, def: 8, speed: 18, range: 1 },
  { name: "gale lancer", type: 3, tier: 2, hp: 80, atk: 16, def: 3, speed: 35, range: 2 },
  { name: "ember dragon", type: 0, tier: 3, hp: 160, atk: 26, def: 5, speed: 28, range: 2 },
  { name: "tide oracle", type: 1, tier: 3, hp: 120, atk: 22, def: 3, speed: 30, range: 4 },
  { name: "stone titan", type: 2, tier: 3, hp: 240, atk: 18, def: 10, speed: 18, range: 1 },
  { name: "gale phoenix", type: 3, tier: 3, hp: 130, atk: 24, def: 4, speed: 40, range: 2 },
];
export const NUM_KINDS = UNITS.length;
export const POOL_COPIES = [0, 20, 15, 10]; // copies of each kind in the shared pool, by tier
export const MAX_STAR = 3;

/** Combat stats of a unit of ``kind`` at ``star`` (1..3): hp x2, x3, x5 of the table's, attack x1, x1.5,
 *  x2.5, defence +1 a star. */
export function statsOf(kind: number, star: number): { hp: number; atk: number; def: number; speed: number; range: number; type: number } {
  const u = UNITS[kind];
  const num = [2, 3, 5][star - 1];
  return { hp: u.hp * num, atk: (u.atk * num) >> 1, def: u.def + star - 1, speed: u.speed, range: u.range, type: u.type };
}

// Connect Four with the observation planes of meeple_native (native/README.md, "Observation planes"):
// (3, 6, 7) float32 from one seat's point of view; row 0 is the top row; plane 2 is all ones.

import { Game, GameSpec } from "../game";

export const WIDTH = 7;
export const HEIGHT = 6;
export const OBS_SIZE = 3 * HEIGHT * WIDTH;
export const ONGOING = -1;
export const DRAW = 2;

export class Connect4 {
  cells: number[][] = Array.from({ length: WIDTH }, () => []); // cells[col][h]: seat (0/1), h = 0 at the bottom
  moves = 0;
  winner: number | null = null; // seat that won
  over = false;

  get toPlay(): number {
    return this.moves % 2;
  }

  isLegal(col: number): boolean {
    return !this.over && col >= 0 && col < WIDTH && this.cells[col].length < HEIGHT;
  }

  legalMask(): number[] {
    return Array.from({ length: WIDTH }, (_, c) => (this.isLegal(c) ? 1 : 0));
  }

  play(col: number): void {
    if (!this.isLegal(col)) throw new Error(`column ${col} is not playable`);
    const seat = this.toPlay;
    this.cells[col].push(seat);
    this.moves += 1;
    if (this.wins(col, this.cells[col].length - 1, seat)) {
      this.winner = seat;
      this.over = true;
    } else if (this.moves === WIDTH * HEIGHT) {
      this.over = true;
    }
  }

  private at(col: number, h: number): number | undefined {
    return col < 0 || col >= WIDTH ? undefined : this.cells[col][h];
  }

  private wins(col: number, h: number, seat: number): boolean {
    for (const [dc, dh] of [[1, 0], [0, 1], [1, 1], [1, -1]]) {
      let run = 1;
      for (const sign of [1, -1]) {
        for (let k = 1; k < 4 && this.at(col + sign * k * dc, h + sign * k * dh) === seat; k++) run++;
      }
      if (run >= 4) return true;
    }
    return false;
  }

  /** Planes from ``seat``'s point of view, flattened (plane, row, col), into zeroed ``obs``. */
  encode(seat: number, obs: Float32Array): void {
    for (let c = 0; c < WIDTH; c++) {
      this.cells[c].forEach((stone, h) => {
        const row = HEIGHT - 1 - h;
        obs[(stone === seat ? 0 : 1) * HEIGHT * WIDTH + row * WIDTH + c] = 1;
      });
    }
    obs.fill(1, 2 * HEIGHT * WIDTH);
  }
}

/** Connect Four behind the host library: turn-based, deterministic (seeds change nothing). */
class Connect4Game implements Game {
  board = new Connect4();
  private lastWinner = ONGOING;

  reset(): void {
    this.board = new Connect4();
    this.lastWinner = ONGOING;
  }

  viewSeat(): number {
    return this.board.toPlay;
  }

  toMove(seat: number): boolean {
    return !this.board.over && seat === this.board.toPlay;
  }

  writeMask(_seat: number, mask: Uint8Array): void {
    for (let c = 0; c < WIDTH; c++) mask[c] = this.board.isLegal(c) ? 1 : 0;
  }

  writeObs(seat: number, obs: Float32Array): void {
    this.board.encode(seat, obs);
  }

  info(): { [name: string]: number } {
    return { to_play: this.board.toPlay, moves: this.board.moves, winner: ONGOING };
  }

  stepInfo(): { [name: string]: number } {
    return { winner: this.lastWinner };
  }

  step(actions: Int32Array): void {
    this.lastWinner = ONGOING;
    this.board.play(actions[this.board.toPlay]);
    if (this.board.over) this.lastWinner = this.board.winner === null ? DRAW : this.board.winner;
  }

  /** +1 to the winner and -1 to the loser at the end, else 0. */
  reward(seat: number): number {
    if (this.lastWinner === ONGOING || this.lastWinner === DRAW) return 0;
    return this.lastWinner === seat ? 1 : -1;
  }

  get over(): boolean {
    return this.board.over;
  }

  readonly truncated = false;
}

export const connect4: GameSpec = {
  name: "connect4", numSeats: 2, numActions: WIDTH, obsShape: [3, HEIGHT, WIDTH],
  info: [["to_play", "uint8"], ["moves", "uint8"], ["winner", "int8"]],
  create: () => new Connect4Game(),
};

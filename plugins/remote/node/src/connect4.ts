// Connect Four with the observation planes of meeple_native (native/README.md, "Observation planes"):
// (3, 6, 7) float32 from one seat's point of view; row 0 is the top row; plane 2 is all ones.

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

  /** Planes from ``seat``'s point of view, flattened (plane, row, col). */
  encode(seat: number): number[] {
    const obs = new Array<number>(OBS_SIZE).fill(0);
    for (let c = 0; c < WIDTH; c++) {
      this.cells[c].forEach((stone, h) => {
        const row = HEIGHT - 1 - h;
        obs[(stone === seat ? 0 : 1) * HEIGHT * WIDTH + row * WIDTH + c] = 1;
      });
    }
    obs.fill(1, 2 * HEIGHT * WIDTH);
    return obs;
  }
}

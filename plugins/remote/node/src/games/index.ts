// The games this server can host, by --game name.

import { GameSpec } from "../game";
import { autobattler } from "./autobattler/game";
import { connect4 } from "./connect4";

export const GAMES: { [name: string]: GameSpec } = { connect4, autobattler };

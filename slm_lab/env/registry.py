"""Which backend runs an env id: the one place that knows env families by name.

An entry names a family, the ids it takes and the module that runs them (imported when used:
a family's simulator loads only for its own runs). The first entry whose `matches` accepts the
id wins; Gymnasium's vector envs take every id no other family claims. A family that this
release does not run yet has an entry with the reason instead of a module, so a spec that
needs it gets that one line. Adding an env family is one module (see slm_lab.env.backend) and
one entry here.
"""

import importlib
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slm_lab.lib.config import SpecError

if TYPE_CHECKING:  # the registry itself loads no simulator
    from slm_lab.env.backend import BackendModule

OUT_OF_DATE = ".*is out of date"  # Gymnasium's colored warning on an id with a newer version
# the games ALE v5 registers, as its ids spell them (ALE/<Game>-v5): a legacy id of one of them,
# e.g. VideoPinball-v0, is an Atari id, while another unknown <Name>-v0 is just not registered.
# Blackjack is left out: Gymnasium's toy text has it, so Blackjack-v0 is a typo of Blackjack-v1.
ATARI_GAMES = (
    "Adventure",
    "AirRaid",
    "Alien",
    "Amidar",
    "Assault",
    "Asterix",
    "Asteroids",
    "Atlantis",
    "Atlantis2",
    "Backgammon",
    "BankHeist",
    "BasicMath",
    "BattleZone",
    "BeamRider",
    "Berzerk",
    "Bowling",
    "Boxing",
    "Breakout",
    "Carnival",
    "Casino",
    "Centipede",
    "ChopperCommand",
    "CrazyClimber",
    "Crossbow",
    "Darkchambers",
    "Defender",
    "DemonAttack",
    "DonkeyKong",
    "DoubleDunk",
    "Earthworld",
    "ElevatorAction",
    "Enduro",
    "Entombed",
    "Et",
    "FishingDerby",
    "FlagCapture",
    "Freeway",
    "Frogger",
    "Frostbite",
    "Galaxian",
    "Gopher",
    "Gravitar",
    "Hangman",
    "HauntedHouse",
    "Hero",
    "HumanCannonball",
    "IceHockey",
    "Jamesbond",
    "JourneyEscape",
    "Kaboom",
    "Kangaroo",
    "KeystoneKapers",
    "KingKong",
    "Klax",
    "Koolaid",
    "Krull",
    "KungFuMaster",
    "LaserGates",
    "LostLuggage",
    "MarioBros",
    "MiniatureGolf",
    "MontezumaRevenge",
    "MrDo",
    "MsPacman",
    "NameThisGame",
    "Othello",
    "Pacman",
    "Phoenix",
    "Pitfall",
    "Pitfall2",
    "Pong",
    "Pooyan",
    "PrivateEye",
    "Qbert",
    "Riverraid",
    "RoadRunner",
    "Robotank",
    "Seaquest",
    "SirLancelot",
    "Skiing",
    "Solaris",
    "SpaceInvaders",
    "SpaceWar",
    "StarGunner",
    "Superman",
    "Surround",
    "Tennis",
    "Tetris",
    "TicTacToe3D",
    "TimePilot",
    "Trondead",
    "Turmoil",
    "Tutankham",
    "UpNDown",
    "Venture",
    "VideoCheckers",
    "VideoChess",
    "VideoCube",
    "VideoPinball",
    "WizardOfWor",
    "WordZapper",
    "YarsRevenge",
    "Zaxxon",
)


@dataclass(frozen=True)
class Family:
    name: str
    pattern: str  # a regular expression the whole env id matches
    module: str | None  # the backend module; None: not available (see `reason`)
    reason: str | None = None

    def matches(self, env_id: str) -> bool:
        return re.fullmatch(self.pattern, env_id) is not None

    def refusal(self, env_id: str) -> str:
        """Why this family does not run `env_id`: its reason, with the pattern's named groups
        (e.g. {game}) filled from the id."""
        match = re.fullmatch(self.pattern, env_id)
        return (self.reason or "").format(**(match.groupdict() if match else {}))


FAMILIES: list[Family] = [
    Family("Atari (ALE)", r"ALE/.+", "slm_lab.env.atari_backend"),
    # the ids before ALE v5 (Gymnasium dropped them), which v5 renamed ALE/<Game>-v5
    Family(
        "legacy Atari",
        rf"(?P<game>{'|'.join(ATARI_GAMES)})(NoFrameskip|Deterministic)?-v[04]",
        None,
        "a legacy Atari id; SLM Lab runs ALE v5: use ALE/{game}-v5 (frameskip 4 and sticky "
        "actions 0.25 by default; env.frameskip and env.repeat_action_probability set them)",
    ),
    # a game by its name alone, as v5's docs name it (Gymnasium registers no such id)
    Family(
        "Atari game by its name",
        rf"(?P<game>{'|'.join(ATARI_GAMES)})",
        None,
        "an Atari game's id is namespaced and versioned: use ALE/{game}-v5",
    ),
    # a v5 game without its namespace (Gymnasium registers none of them as such)
    Family(
        "Atari without its namespace",
        rf"(?P<game>{'|'.join(ATARI_GAMES)})-v5",
        None,
        "an Atari game's v5 id is namespaced: use ALE/{game}-v5",
    ),
    Family("MuJoCo Playground", r"playground/.+", "slm_lab.env.playground_backend"),
    Family("Gymnasium", r".*", "slm_lab.env.gym_backend"),  # the last: it takes every id
]


def newer_version(env_name: str) -> str | None:
    """The id to use instead of a versioned Gymnasium id with a newer version registered
    (Hopper-v4: Hopper-v5); None for the newest, an unversioned id or one of another family."""
    if family_of(env_name) is not FAMILIES[-1]:
        return None
    import gymnasium as gym  # the registry itself loads no simulator

    registration = gym.envs.registration
    module, _, env_id = env_name.rpartition(":")
    try:
        namespace, name, version = registration.parse_env_id(env_id)
    except gym.error.Error:
        return None  # not an id Gymnasium could register: its validation names it
    latest = registration.find_highest_version(namespace, name)
    if version is None or latest is None or latest <= version:
        return None
    newer = registration.get_env_id(namespace, name, latest)
    return f"{module}:{newer}" if module else newer


def family_of(env_name: str) -> Family:
    """The family that runs `env_name`. A `module:EnvId` name is the user's own module
    registering a Gymnasium env, whatever the id looks like."""
    if ":" in env_name:
        return FAMILIES[-1]
    return next(f for f in FAMILIES if f.matches(env_name))


def backend_module(env_name: str) -> "BackendModule":
    """The module of the backend that runs `env_name`; SpecError when its family is not
    available."""
    family = family_of(env_name)
    if family.module is None:
        raise SpecError(f"env.name: {env_name}: {family.refusal(env_name)}")
    module = importlib.import_module(family.module)
    if family is FAMILIES[-1]:  # validation says which id to use in one line (newer_version)
        warnings.filterwarnings("ignore", OUT_OF_DATE, DeprecationWarning)
    return module

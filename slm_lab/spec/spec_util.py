"""Specs, read and validated up front: the entry point of the spec checks.

`load_spec` reads a spec file (spec/parse.py), fills its ${vars} and -s values and `validate`s
it: its keys, types and values (spec/schema.py), its fit to its env's spaces (spec/env_fit.py),
its search block (spec/search_checks.py), and warns of schedules that do not fit the run
(spec/schedules.py); a run also checks the machine's resources (spec/resources.py). Every user
mistake raises SpecError with one line: the key path, the bad value, and where it helps, the
nearest valid key ("did you mean ..."). Validation imports no torch (torch's names come from a
table, see slm_lab.agent.net.config), so `slm-lab check` is quick; only a TorchArcNet spec
loads torch, to build its graph.
"""

from dataclasses import dataclass
from typing import Any

from slm_lab.lib.config import SpecError, did_you_mean
from slm_lab.lib.util import full_install
from slm_lab.spec import schema, search_space
from slm_lab.spec.env_fit import check_env_fit, env_spaces, spaces_built_once
from slm_lab.spec.parse import (
    VAR_PATTERN,
    apply_overrides,
    env_suffix,
    file_placeholders,
    fill_template,
    find_spec_file,
    parse_sets,
    read_spec_file,
    spec_from_file,
    split_sets,
    substitute,
    unresolved_vars,
)
from slm_lab.spec.resources import check_gpu, check_memory_fit, fetch_env_assets, memory_layout
from slm_lab.spec.schedules import (
    schedule_warnings,
    update_warning,
    update_warnings,
    warn_schedules,
)
from slm_lab.spec.schema import Spec
from slm_lab.spec.search_checks import (
    check_probes,
    check_search_run,
    check_search_spec,
    check_searched_path,
    check_trial_resources,
)

__all__ = [
    "LoadedSpec",
    "Spec",
    "SpecError",
    "check_gpu",
    "check_memory_fit",
    "check_search_run",
    "check_search_spec",
    "check_spec",
    "check_trial_resources",
    "check_typed",
    "did_you_mean",
    "env_spaces",
    "env_suffix",
    "fetch_env_assets",
    "file_placeholders",
    "find_spec_file",
    "get_spec",
    "load_spec",
    "memory_layout",
    "parse_sets",
    "read_spec_file",
    "schedule_warnings",
    "spaces_built_once",
    "substitute",
    "update_warning",
    "update_warnings",
    "validate",
    "warn_schedules",
]


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec, with the -s values that took effect: placeholders filled, spec paths set."""

    spec: Spec
    placeholders: dict[str, str]
    overrides: dict[str, Any]


def load_spec(
    spec_file: str,
    spec_name: str,
    sets: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> LoadedSpec:
    """Read a spec, fill its ${placeholders} and set the spec paths `sets` name (both from -s,
    as text) and those `values` name (typed: the CLI's shortcut options), normalize and
    validate it; its name gets the env's suffix when -s changed the env."""
    placeholders, paths = split_sets(spec_file, spec_name, sets or {})
    spec = spec_from_file(spec_file, spec_name, placeholders, template=False)
    overrides = apply_overrides(spec, paths)
    if values:
        spec = search_space.set_paths(spec, values)
        overrides.update(values)
    for var, where in sorted(unresolved_vars(spec, spec_name).items()):
        raise SpecError(f"{where}: unresolved ${{{var}}}; pass it with -s {var}=VALUE")
    env_name = placeholders.get("env") or overrides.get("env.name")
    spec["name"] = spec_name + (f"_{env_suffix(str(env_name))}" if env_name else "")
    return LoadedSpec(validate(spec, spec_name), placeholders, overrides)


def get_spec(
    spec_file: str, spec_name: str, variables: dict[str, str] | None = None
) -> dict[str, Any]:
    """The validated spec as plain data (see load_spec)."""
    return load_spec(spec_file, spec_name, variables).spec.to_dict()


def check_spec(
    spec_file: str, spec_name: str, variables: dict[str, str] | None = None
) -> list[str]:
    """Validate one spec as `check` does; returns the ${vars} it still needs (a template spec).

    A template's placeholders are validated as far as they can be: a placeholder stands for a
    number where the key takes one, and an unfilled env name skips the checks that need the env.
    """
    placeholders, paths = split_sets(spec_file, spec_name, variables or {})
    spec = spec_from_file(spec_file, spec_name, placeholders, template=True)
    apply_overrides(spec, paths)
    missing = unresolved_vars(spec)
    if missing:
        spec = fill_template(spec)
    validate(spec, spec_name, warn_schedules=not missing)  # a stand-in max_frame fits no schedule
    return sorted(missing)


def validate(spec: dict[str, Any], spec_name: str = "", warn_schedules: bool = True) -> Spec:
    """Check keys, types and values of a whole spec, and that it fits its env; the typed spec.
    SpecError on the first problem."""
    loaded = schema.load(spec, spec_name)
    check_typed(loaded, warn_schedules)
    for param in loaded.search or ():
        check_searched_path(param, loaded)
        check_probes(param, spec, spec_name)
    return loaded


def check_typed(spec: Spec, schedules: bool = True) -> None:
    """The checks of a typed spec that need its env (it fits its env's spaces), and the
    warnings a run gets at its start (`schedules`: those of its schedules). Without the full
    install (no Gymnasium to build the env's spaces) only the spec's syntax is checked."""
    # a template's env is checked when it is given
    if not VAR_PATTERN.search(spec.env.name) and full_install():
        check_env_fit(spec)
    if schedules:
        warn_schedules(spec)

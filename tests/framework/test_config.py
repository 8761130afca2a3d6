from dataclasses import dataclass

import pytest

from repdyn.framework.config import (
    ConfigError,
    apply_overrides,
    from_dict,
    param,
    parse_assignments,
    to_dict,
)


@dataclass(frozen=True)
class Cfg:
    width: int = param(10, ge=1)
    lr: float = param(0.1, gt=0)
    act: str = param("relu", choices=("relu", "tanh"))
    gains: tuple[float, ...] = param((0.1, 1.0), gt=0)
    adam: bool = param(False)


def test_overrides_parse_each_type():
    cfg = apply_overrides(Cfg(), {"width": "3", "lr": "1e-3", "act": "tanh", "gains": "0.5,2", "adam": "true"})
    assert cfg == Cfg(3, 1e-3, "tanh", (0.5, 2.0), True)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("width", "0", "width=0 is out of range: must be >= 1"),
    ("lr", "-1", "lr=-1.0 is out of range: must be > 0"),
    ("lr", "abc", "lr='abc' is not a valid float"),
    ("act", "gelu", "act='gelu' is not allowed: choose one of relu, tanh"),
    ("gains", "1,0", "gains=0.0 is out of range: must be > 0"),
    ("adam", "maybe", "adam='maybe' is not a boolean: use true or false"),
    ("depth", "3", "unknown setting 'depth': allowed keys are width, lr, act, gains, adam"),
    ("lr", "nan", "lr=nan must be a finite number"),
])
def test_bad_values_name_the_key_and_what_is_allowed(key, value, message):
    with pytest.raises(ConfigError) as info:
        apply_overrides(Cfg(), {key: value})
    assert str(info.value) == message


def test_assignments_and_round_trip():
    assert parse_assignments(["a=1", "b=x,y"]) == {"a": "1", "b": "x,y"}
    with pytest.raises(ConfigError, match="not of the form key=value"):
        parse_assignments(["oops"])
    assert from_dict(Cfg, to_dict(Cfg())) == Cfg()

"""The one registry type (edit_lib/registry.py): registration, lazy entries, errors that list the known names; and
the tables built on it (data sources, benchmarks, providers) answer through it."""
import pytest

from edit_lib.registry import Lazy, Registry, UnknownName


def test_register_add_and_lookup_in_registration_order():
    reg = Registry("widget", "parts.widget")

    @reg.register("b")
    def b():
        return 2

    reg.add("a", 1)
    assert list(reg) == ["b", "a"] and reg["a"] == 1 and reg["b"] is b and len(reg) == 2 and "a" in reg
    with pytest.raises(ValueError, match="widget 'a' is registered already"):
        reg.add("a", 3)
    reg["a"] = 3  # a plain assignment replaces (a test's monkeypatch, a worker's re-registration)
    assert reg["a"] == 3 and reg.get("zzz") is None


def test_unknown_names_say_where_the_nearest_and_every_known_name():
    reg = Registry("widget", "parts.widget")
    reg.update({"sprocket": 1, "gear": 2})
    with pytest.raises(UnknownName) as e:
        reg["sprockett"]
    assert str(e.value) == ("parts.widget = 'sprockett' names no widget (did you mean 'sprocket'?); known: "
                            "'sprocket', 'gear'")
    assert isinstance(e.value, KeyError) and isinstance(e.value, ValueError)
    assert reg.unknown("x", "mine.widget") == "mine.widget = 'x' names no widget; known: 'sprocket', 'gear'"
    assert Registry("widget").unknown("x") == "'x' names no widget; known: none"

    class Mine(LookupError):
        pass

    with pytest.raises(Mine):
        Registry("widget", error=Mine)["x"]


def test_lazy_entries_import_on_first_use_once():
    reg = Registry("function")
    reg.add("sqrt", Lazy("math:sqrt"))
    reg.add("join", Lazy("os.path:join"))
    assert isinstance(reg._entries["sqrt"], Lazy)  # nothing imported at registration
    assert reg["sqrt"](9) == 3 and reg["join"]("a", "b") == "a/b"
    assert not isinstance(reg._entries["sqrt"], Lazy)  # resolved once, kept
    with pytest.raises(ValueError, match="'package.module:attr'"):
        Lazy("math.sqrt")
    reg.add("nope", Lazy("math:no_such_function"))
    with pytest.raises(AttributeError):
        reg["nope"]


def test_the_suites_tables_are_registries():
    from edit_lib import providers, systems
    from edit_lib.data.registry import SOURCES
    from edit_lib.data.rubric_edits import EDITS
    from edit_lib.tools.bench import BENCHMARKS

    assert all(isinstance(r, Registry) for r in (SOURCES, BENCHMARKS, EDITS, systems.BY_NAME,
                                                 *providers.REGISTRIES.values()))
    assert list(SOURCES) == ["synthetic", "asap", "sasbench", "jsonl"]
    assert SOURCES["asap"].folder == "asap_sas" and SOURCES["synthetic"].paths({}) == []
    assert SOURCES["asap"].paths({"path": "/x/y"})[0].as_posix() == "/x/y"
    with pytest.raises(UnknownName, match="names no benchmark"):
        BENCHMARKS["nope"]


def test_restore_drops_what_was_registered_since_the_snapshot():
    r = Registry("thing")
    r.add("a", 1)
    before = r.snapshot()
    r.add("b", 2)
    r["a"] = 3
    r.restore(before)
    assert dict(r) == {"a": 1} and before == {"a": 1}

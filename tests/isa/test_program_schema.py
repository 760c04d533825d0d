"""The Program JSON Schema: shipped, generated from the record classes, valid for every catalogue Program, and the
rules a Program's structure adds (warps 0-31, one role per warp, table counts = init counts, strict JSON)."""

import json

import attrs
import jsonschema
import pytest

from simtc.errors import SimtcError
from simtc.isa import REGISTRY, Barrier, CudaCoreBlock, MbarrierInit, Program, Role
from simtc.isa.files import FileFormatError, loads_json
from simtc.isa.program import MAX_WARPS, program_schema
from simtc.isa.schema import INT_MAX, SCHEMA_FILE, field_schema, shipped
from simtc.kernels import registry


def test_the_shipped_schema_is_the_generated_one():
    assert shipped() == program_schema(), (
        "simtc/isa/program.schema.json is stale: regenerate it with "
        "python -c 'from simtc.isa.program import write_schema; write_schema()'")


def test_the_schema_is_a_valid_draft_2020_12_schema():
    schema = shipped()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_every_record_class_and_field_is_described():
    defs = shipped()["$defs"]
    assert set(defs["record"]["properties"]["op"]["enum"]) == set(REGISTRY)
    for op, cls in REGISTRY.items():
        props = defs[f"record.{op}"]["properties"]
        assert set(props) == {"op", *(a.name for a in attrs.fields(cls)), *cls._json_extra}, op
        required = {a.name for a in attrs.fields(cls) if a.default is attrs.NOTHING}
        assert set(defs[f"record.{op}"]["required"]) == {"op", *required}, op


def test_a_field_type_without_a_schema_is_refused_at_generation():
    @attrs.frozen
    class Odd:
        x: "set[int]" = attrs.field()

    with pytest.raises(TypeError, match="no JSON schema"):
        field_schema(attrs.fields(Odd).x)


def _catalogue():
    out = {name: registry.build(name) for name in registry.programs()}
    out["flashmla-head64 (replay default)"] = registry.build("flashmla-head64", model="v32", blocks=4)
    return out


def test_every_catalogue_program_and_head64_validates_and_round_trips():
    progs = _catalogue()
    assert len(progs) > 70 and "flashmla-head64" in progs
    for name, p in progs.items():  # Program.from_json checks the schema first (one validator per op)
        assert Program.from_json(json.loads(json.dumps(p.to_json()))) == p, name


def _life_cycle_program() -> Program:
    """The records no catalogue program holds yet: mbarrier.inval, token waits, elect.sync, tcgen05.shift, a
    partial warp."""
    import simtc.isa as isa

    mma = (isa.ElectSync(), isa.MbarrierInit("b", 1), isa.Shift(0), isa.Commit("b"),
           isa.MbarrierTryWait("b", 0), isa.MbarrierArrive("t", state="st0"), isa.MbarrierTryWait("t", token="st0"),
           isa.MbarrierInval("b"), isa.MbarrierInval("t"))
    return Program("life", (Role("warp", (0,), (isa.ElectSync(),), threads=16), Role("lane", (0,), mma, threads=1)),
                   (Barrier("t", "mbarrier", 1),))


def test_the_file_alone_validates_programs_holding_every_op():
    """The shipped file with its own allOf / if / then record dispatch (as an outside tool reads it), on the
    smallest catalogue programs that together hold every op (and a small program with the records no catalogue
    program holds yet)."""
    full = jsonschema.Draft202012Validator(shipped())
    todo, used = set(REGISTRY), []
    progs = [*sorted(_catalogue().items(), key=lambda kv: len(kv[1])), ("life", _life_cycle_program())]
    for name, p in progs:
        ops = {rec.op for _, _, rec in p.records()}
        if ops & todo:
            todo -= ops
            used.append(name)
            errors = list(full.iter_errors(p.to_json()))
            assert not errors, (name, errors[:1])
    assert not todo, f"no catalogue program holds {sorted(todo)}"
    assert len(used) >= 3


def test_the_shipped_schema_refuses_what_the_loader_refuses():
    """The file alone (as an outside tool would use it) refuses a misspelt key, an unknown op and a bad field."""
    full = jsonschema.Draft202012Validator(shipped())
    d = registry.build("hazard/ring-parity-alias").to_json()
    assert full.is_valid(d)
    for edit in (lambda d: d.__setitem__("barrier", d.pop("barriers")),
                 lambda d: d["roles"]["producer"]["records"][0].__setitem__("op", "mbarrier.initt"),
                 lambda d: d["roles"]["producer"]["records"][0].__setitem__("count", "1"),
                 lambda d: d["roles"]["producer"]["records"][0].pop("bar")):
        bad = json.loads(json.dumps(d))
        edit(bad)
        assert not full.is_valid(bad)


def test_max_warps_is_the_tmem_models_cta_warps():
    from simtc.tmem.memory import CTA_WARPS

    assert MAX_WARPS == CTA_WARPS == 32


# ---- the structural rules, on Programs built in Python too --------------------------------------------------
def _role(name, warps, threads=None, records=()):
    kw = {} if threads is None else {"threads": threads}
    return Role(name, warps, (*records, CudaCoreBlock("work", (("FFMA", 1),))), **kw)


def test_warp_32_and_above_is_refused():
    Program("ok", (_role("a", (31,)),))
    with pytest.raises(SimtcError, match="at most 32 warps") as e:
        Program("bad", (_role("a", (40,)),))
    assert e.value.rule == "CTA warp indices are 0-31" and "threads per block" in e.value.ref


def test_a_warp_in_two_roles_is_refused_unless_one_is_a_one_thread_role_or_they_share_its_lanes():
    with pytest.raises(SimtcError, match="warp 4 is in roles 'a' and 'b' with 64 lanes") as e:
        Program("bad", (_role("a", (4, 5)), _role("b", (4,))))
    assert e.value.rule == "a warp's roles share its 32 lanes"
    Program("ok", (_role("a", (0, 1)), _role("elected", (0,), threads=1)))  # flashmla-sm90's q_load
    Program("ok", (_role("lo", (0,), threads=16), _role("hi", (0,), threads=16)))  # partial warps: 16 + 16 lanes
    with pytest.raises(SimtcError, match="with 40 lanes"):
        Program("bad", (_role("lo", (0,), threads=16), _role("hi", (0,), threads=24)))


def test_a_table_count_that_disagrees_with_its_init_is_refused():
    init = MbarrierInit("full", 2)
    with pytest.raises(SimtcError, match=r"table gives 'full' count 1 but .* count 2") as e:
        Program("bad", (_role("a", (0,), records=(init,)),), barriers=(Barrier("full", "mbarrier", 1),))
    assert "§9.7.13.15.9" in e.value.ref
    Program("ok", (_role("a", (0,), records=(init,)),), barriers=(Barrier("full", "mbarrier", 2),))
    with pytest.raises(SimtcError, match="named barrier"):
        Program("bad", (_role("a", (0,), records=(init,)),), barriers=(Barrier("full", "named", 64, id=1),))


def test_a_program_needs_a_role_and_a_role_needs_a_warp():
    with pytest.raises(SimtcError, match="at least one role"):
        Program("empty", ())
    with pytest.raises(SimtcError, match="at least one warp"):
        Role("r", (), ())


# ---- loading: schema errors name the JSON path and the rule --------------------------------------------------
@pytest.fixture
def ring():
    return registry.build("hazard/ring-parity-alias").to_json()


def _refusal(d) -> SimtcError:
    with pytest.raises(SimtcError) as e:
        Program.from_json(d)
    assert e.value.rule
    return e.value


def test_a_misspelt_key_is_told_with_the_key_it_meant(ring):
    ring["barrier"] = ring.pop("barriers")
    e = _refusal(ring)
    assert "unknown key 'barrier'" in e.message and "did you mean 'barriers'?" in e.message and "at $" not in e.message
    assert "simtc program --schema" in e.rule


def test_a_misspelt_record_field_names_the_record(ring):
    ring["roles"]["producer"]["records"][1]["cuont"] = 64
    e = _refusal(ring)
    assert e.message.startswith("role 'producer' record 1 (mbarrier.init)")
    assert "unknown JSON field 'cuont' (did you mean 'count'?)" in e.message
    assert "$.roles.producer.records[1]" in e.message


@pytest.mark.parametrize("edit, pieces", [
    (lambda d: d["roles"]["producer"]["records"][0].update(op="mbarrier.int"),
     ["unknown record op 'mbarrier.int'", "did you mean 'mbarrier.init'?", "$.roles.producer.records[0].op"]),
    (lambda d: d["roles"]["producer"]["records"][0].pop("op"), ["lacks the key 'op'"]),
    (lambda d: d["roles"]["producer"].update(warps=[1.5]), ["\"warps\" must be an integer, got 1.5",
                                                             "$.roles.producer.warps[0]"]),
    (lambda d: d["roles"]["producer"].update(warps=[True]), ["\"warps\" must be an integer, got true"]),
    (lambda d: d["roles"]["producer"].update(warps=["5"]), ["\"warps\" must be an integer, got '5'"]),
    (lambda d: d["roles"]["producer"].update(warps=[]), ["role 'producer'", "at least one warp"]),
    (lambda d: d["roles"]["producer"].update(warps=[40]), ["warp 40", "at most 32 warps"]),
    (lambda d: d["roles"]["producer"].update(warps=[10**30]), ["outside", str(INT_MAX), "$.roles.producer.warps[0]"]),
    (lambda d: d["roles"]["consumer_a"].update(warps=[5]), ["warp 5 is in roles 'producer' and 'consumer_a'"]),
    (lambda d: d["roles"]["producer"].update(threads=0), ["0 threads do not fit"]),
    (lambda d: d["barriers"][0].update(count=-3), ["barrier 0 ('full')", "count -3"]),
    (lambda d: d["barriers"][0].update(count=10**30), ["barrier 0 ('full')", "outside"]),
    (lambda d: d["barriers"][0].update(count=2), ["table gives 'full' count 2", "count 1"]),
    (lambda d: d["barriers"][0].update(kind="mbar"), ["$.barriers[0].kind", "'mbar' is not one of"]),
    (lambda d: d.update(roles={}), ["at least one role"]),
    (lambda d: d.update(roles=[1]), ["\"roles\" must be a JSON object"]),
    (lambda d: d.pop("name"), ["lacks the key 'name'", "a Program's JSON is an object"]),
    (lambda d: d.update(meta=[["a", True]]), ["\"meta\" must be a string or a number, got true"]),
    (lambda d: d["roles"]["producer"]["records"].__setitem__(0, "mbarrier.init"), ["record 0:", "'op' tag"]),
    (lambda d: d["roles"]["producer"]["records"][0].update(bar=7), ["field 'bar' must be a string, got 7"]),
])
def test_bad_program_json_is_refused_naming_where_and_the_rule(ring, edit, pieces):
    ring.pop("counts")
    edit(ring)
    e = _refusal(ring)
    for p in pieces:
        assert p in str(e), (p, str(e))


@pytest.mark.parametrize("value", [[1, 2], "hello", 3, None])
def test_a_file_that_is_not_an_object_is_refused(value):
    e = _refusal(value)
    assert "a Program's JSON is an object" in e.message


# ---- strict JSON -----------------------------------------------------------------------------------------------
def test_a_repeated_key_is_refused_naming_the_key_and_where(ring):
    text = json.dumps(ring).replace('"warps": [5]', '"warps": [5], "warps": [6]', 1)
    assert json.loads(text)["roles"]["producer"]["warps"] == [6]  # what json.loads alone does: the last one wins
    with pytest.raises(FileFormatError, match=r"key 'warps' appears twice in the object at \$\.roles\.producer") as e:
        loads_json(text, "p.json", rule="Program JSON")
    assert e.value.rule == "each key appears once in a JSON object"
    with pytest.raises(FileFormatError, match=r"key 'a' appears twice in the object at \$\[1\]"):
        loads_json('[{"a": 1}, {"b": {}, "a": 1, "a": 2}]', "p.json", rule="Program JSON")


@pytest.mark.parametrize("data, piece", [
    (b"", "the file is empty"),
    (b"  \n", "the file is empty"),
    (b"\xff\xfe{}", "not UTF-8 text"),
    (b'{"a": 1', "is the file complete?"),
    (b"[1, [2, ", "is the file complete?"),
    (("[" * 100000 + "]" * 100000).encode(), "nested too deeply"),
    (b'{"a": NaN}', "NaN is not a JSON number"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not readable JSON"),
])
def test_damaged_json_is_one_refusal(data, piece):
    with pytest.raises(FileFormatError, match=piece):
        loads_json(data, "p.json", rule="Program JSON", constants=False)


def test_the_schema_file_is_package_data():
    from pathlib import Path

    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    data = pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    deps = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert '"isa/program.schema.json"' in data and '"jsonschema>=' in deps
    assert SCHEMA_FILE.is_file()


def test_the_worked_example_validates_against_the_shipped_file_and_loads():
    """examples/tcgen05_gemm.json (the page "Describe your own kernel") is valid under the shipped file read by an
    outside validator, and Program.from_json loads it."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "tcgen05_gemm.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert not list(jsonschema.Draft202012Validator(shipped()).iter_errors(doc))
    p = Program.from_json(doc)
    assert {r.name for r in p.roles} >= {"mma"} and len(p) > 30

"""The platform a lowering used, in OUT/manifest.json (docs/FORMATS.md §1.1 ``topology``:
``platform``, ``hw_generation``, ``cce_max_elements``), and simulate's check of every CCE
descriptor against that platform's element cap (docs/SIMULATOR.md §2 "§6 CCE").

The numbers are the seed's, written out here: ``aws_hal_get_sdma_max_cce_elements`` caps a
CCE descriptor at 2048 elements on v3/v4 and 1024 on v2 (seed 000 §3.4); trn1 is
NeuronCore-v2, trn2 v3 (docs/TOPOLOGY.md).  ``fixtures/ar2.neff`` is one bf16 (2-byte) ADD
all-reduce over ranks 0 and 1, long enough that its reduce legs are tiled at the cap:
cce.bin W2 (offset 8 of each 16-byte descriptor) is 1024 x 2 = 0x800 bytes on trn1 and
2048 x 2 = 0x1000 on trn2."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from test_simulate import assert_clean, cli, lower_neff

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CCE_RECORD, W2 = 16, 8
#: (platform, hw_generation, elements per CCE descriptor, W2 of a full bf16 tile): seed 000 §3.4
TRN1 = ("trn1", 2, 1024, 0x800)
TRN2 = ("trn2", 3, 2048, 0x1000)
PLATFORM_KEYS = ("platform", "hw_generation", "cce_max_elements")


@pytest.fixture(scope="module")
def lowered(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("platform")
    return {name: lower_neff(FIX / "ar2.neff", base / name, topology=name, algo="ring")
            for name in ("trn1", "trn2")}


def _first_w2(cap: int) -> int:
    """W2 of ar2's cce.bin record 0 (FORMATS §6: the bytes of source 0 in tile 0) on a
    platform of CCE cap ``cap``, worked from fixtures/ar2.yaml: a bf16 all-reduce of 1 MiB
    (524288 elements) over 2 ranks, one channel; a chunk position's 262144 elements (512
    KiB) fit DESIGN.md "Chunking"'s 512 KiB cap, so one chunk group of halves of 131072. The
    first reduce leg (seed 001 §4 over 2 ranks: recv_reduce_copy of H0) tiles at min(2 x
    131072, 64 KiB) & ~0x1F bytes = 32768 elements, capped at ``cap`` (FORMATS §3 n_tiles)."""
    half = 1024 * 1024 // 2 // 2 // 2
    assert half * 2 * 2 <= 512 * 1024  # the chunk, 2 halves of 2-byte elements
    t = min((min(half * 2, 65536) & ~0x1F) // 2, cap)
    return t * 2


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _edit_topology(out: Path, **keys) -> None:
    """Set (value) or drop (None) keys of the manifest's ``topology``."""
    doc = _manifest(out)
    for k, v in keys.items():
        if v is None:
            doc["topology"].pop(k, None)
        else:
            doc["topology"][k] = v
    (out / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _w2(out: Path, rank: int) -> list[int]:
    data = (out / f"rank-{rank:04d}" / "cce.bin").read_bytes()
    return [struct.unpack_from("<I", data, i + W2)[0] for i in range(0, len(data), CCE_RECORD)]


def _simulate_error(out: Path) -> str:
    """simulate's one-line error for ``out`` (checksums ignored: the tests tamper)."""
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["error"], doc
    assert "\n" not in doc["error"] and "Traceback" not in res.output
    return doc["error"]


@pytest.mark.parametrize("platform", [TRN1, TRN2])
def test_manifest_records_the_platform_and_its_cce_cap(lowered, platform):
    name, gen, cap, w2 = platform
    topo = _manifest(lowered[name])["topology"]
    assert (topo["platform"], topo["hw_generation"], topo["cce_max_elements"]) == (name, gen, cap)
    # the descriptors are tiled at that cap (so the untouched output is checked at the edge)
    for rank in (0, 1):
        assert max(_w2(lowered[name], rank)) == w2


def test_default_and_custom_topologies_record_their_platform(tmp_path):
    """No --topology: trn2 (v3, 2048).  A topology file without a preset names its platform
    after its ``name``; its ``hw_generation`` 2 gives the v2 cap, 1024."""
    out = lower_neff(FIX / "ar2.neff", tmp_path / "default", algo="ring")
    topo = _manifest(out)["topology"]
    assert [topo[k] for k in PLATFORM_KEYS] == ["trn2", 3, 2048]
    doc = {"format": "nrtrewrite-topology/1", "name": "quad", "torus": [2, 2],
           "device": {"dies": 1, "sengines_per_die": 2, "tpbs_per_sengine": 1},
           "hw_generation": 2}
    (tmp_path / "quad.json").write_text(json.dumps(doc))
    out = lower_neff(FIX / "ar2.neff", tmp_path / "custom", topology=str(tmp_path / "quad.json"),
                     algo="ring")
    topo = _manifest(out)["topology"]
    assert [topo[k] for k in PLATFORM_KEYS] == ["quad", 2, 1024]
    assert max(_w2(out, 0)) == 0x800
    assert_clean(out)


#: the manifest's topology keys on a platform exactly a preset (FORMATS §1.1)
PRESET_KEYS = {"name", "lnc_size", "nodes", "platform", "hw_generation", "cce_max_elements",
               "mesh_sub_type", "ranks"}


def test_a_platform_not_exactly_a_preset_is_recorded_whole(lowered, tmp_path):
    """FORMATS §1.1 (2026-12-06): on a preset, also given as a file, the topology keys are
    the ones above; a file changing the preset, or a custom platform, adds every other
    platform field (docs/TOPOLOGY.md §2), worked out from
    the files: quad's 2 x 2 torus of one-die devices, each device linked to its two
    neighbours (+x port 0, +y port 2: FORMATS' torus numbering, the lower port of a 2-wide
    dimension kept)."""
    for name in ("trn1", "trn2"):
        assert set(_manifest(lowered[name])["topology"]) == PRESET_KEYS
    (tmp_path / "same.json").write_text(json.dumps({"platform": "trn1", "name": "same"}))
    out = lower_neff(FIX / "ar2.neff", tmp_path / "same", topology=str(tmp_path / "same.json"),
                     algo="ring")
    assert set(_manifest(out)["topology"]) == PRESET_KEYS
    (tmp_path / "gen.json").write_text(json.dumps({"platform": "trn1", "hw_generation": 3}))
    out = lower_neff(FIX / "ar2.neff", tmp_path / "gen", topology=str(tmp_path / "gen.json"),
                     algo="ring")
    topo = _manifest(out)["topology"]
    assert set(topo) == PRESET_KEYS | {
        "lnc_sizes", "devices_per_node", "device", "links", "device_cycles", "routing_ids",
        "kangaring", "mesh", "torus"}
    assert [topo[k] for k in PLATFORM_KEYS] == ["trn1", 3, 2048]
    assert (topo["lnc_sizes"], topo["devices_per_node"], topo["torus"], topo["kangaring"],
            topo["mesh_sub_type"]) == ([1], 16, [4, 4], False, "GROUPED_MESH")
    assert max(_w2(out, 0)) == 0x1000  # tiled at v3's cap, the file's generation
    assert_clean(out)
    doc = {"name": "quad", "torus": [2, 2], "mesh": False,
           "device": {"dies": 1, "sengines_per_die": 2, "tpbs_per_sengine": 1}}
    (tmp_path / "quad.json").write_text(json.dumps(doc))
    out = lower_neff(FIX / "ar2.neff", tmp_path / "quad", topology=str(tmp_path / "quad.json"),
                     algo="ring")
    topo = _manifest(out)["topology"]
    assert topo["platform"] == "quad" and topo["mesh"] is False
    assert topo["mesh_sub_type"] is None  # (no mesh: null, as before)
    assert topo["device"] == {"dies": 1, "sengines_per_die": 2, "tpbs_per_sengine": 1,
                              "c2c_ports": 4}
    assert topo["links"] == [[0, 0, 1], [0, 2, 2], [1, 0, 0], [1, 2, 3], [2, 0, 3], [2, 2, 0],
                             [3, 0, 2], [3, 2, 1]]
    assert topo["routing_ids"] == [0, 1, 2, 3] and topo["torus"] == [2, 2]
    assert_clean(out)


@pytest.mark.parametrize("name", ["trn1", "trn2"])
def test_untouched_lowering_simulates(lowered, name):
    assert_clean(lowered[name])


def test_trn1_cce_descriptor_tampered_to_2048_elements_is_refused(lowered, tmp_path):
    """W2 of rank 0's cce.bin record 0 set to 0x1000 (2048 bf16): over trn1's 1024. As
    lowered it is 0x800 (_first_w2): trn1's cap of 1024 elements x 2 bytes."""
    out = _copy(lowered["trn1"], tmp_path)
    path = out / "rank-0000" / "cce.bin"
    data = bytearray(path.read_bytes())
    assert struct.unpack_from("<I", data, W2)[0] == _first_w2(1024) == 0x800
    struct.pack_into("<I", data, W2, 0x1000)
    path.write_bytes(bytes(data))
    err = _simulate_error(out)
    for part in ("rank-0000", "rank 0", "artifact cce.bin", "record 0", "field w2",
                 "2048 elements", "1024 elements per CCE descriptor of platform trn1",
                 "hw_generation 2"):
        assert part in err, err


def _edit_options(out: Path, topology) -> None:
    doc = _manifest(out)
    doc["options"]["topology"] = topology
    (out / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def test_trn2_tiles_under_a_trn1_manifest_are_refused(lowered, tmp_path):
    """A trn2 lowering (consistent 2048-element tiles: data BDs, W2 and n_tiles agree) whose
    manifest says trn1: only the platform's cap tells it is wrong.  Since 2026-12-05 evening
    a preset's output (options.topology "trn2") is held to the preset's platform first
    (docs/SIMULATOR.md §1): the cap is reached with options.topology naming a topology file,
    whose platform the manifest's keys alone say."""
    out = _copy(lowered["trn2"], tmp_path)
    _edit_topology(out, platform="trn1", hw_generation=2, cce_max_elements=1024)
    err = _simulate_error(out)
    assert err.endswith("field topology.platform: topology.platform should be \"trn2\", trn2's, "
                        'not "trn1" (the platform of options.topology "trn2": docs/TOPOLOGY.md '
                        "§1)"), err
    _edit_options(out, "trn1-like.json")
    err = _simulate_error(out)
    assert "cce.bin" in err and "record 0" in err and "field w2" in err, err
    assert "W2 length 4096 bytes = 2048 elements of 2 bytes, more than the 1024" in err, err


def test_a_manifest_without_the_platform_still_simulates(lowered, tmp_path):
    """Manifests written before the platform was recorded: the cap is the preset's that
    options.topology names (since 2026-12-05 evening; before, the largest of any
    generation, 2048), trn1's 1024 and trn2's 2048, so both outputs pass
    (docs/SIMULATOR.md)."""
    for name in ("trn1", "trn2"):
        out = _copy(lowered[name], tmp_path / name)
        _edit_topology(out, **dict.fromkeys(PLATFORM_KEYS))
        assert not set(PLATFORM_KEYS) & set(_manifest(out)["topology"])
        assert_clean(out)


@pytest.mark.parametrize("keys, field, says", [
    ({"hw_generation": 5}, "topology.hw_generation",
     "topology.hw_generation is 5: the hardware generation must be one of 2, 3, 4"),
    ({"cce_max_elements": 1024}, "topology.cce_max_elements",
     "topology.cce_max_elements is 1024: hw_generation 3 caps a CCE descriptor at 2048 elements"),
    ({"hw_generation": 2}, "topology.cce_max_elements",
     "topology.cce_max_elements is 2048: hw_generation 2 caps a CCE descriptor at 1024 elements"),
    # (a value as JSON writes it: until 2026-12-05 Python's, '')
    ({"platform": ""}, "topology.platform",
     'topology.platform is "": the platform\'s name must be a non-empty string'),
])
def test_manifest_platform_values_are_checked(lowered, tmp_path, keys, field, says):
    """A manifest that records the platform records all of it, consistently with the seed's
    caps; anything else is a one-line error naming the field."""
    out = _copy(lowered["trn2"], tmp_path)
    _edit_topology(out, **keys)
    err = _simulate_error(out)
    assert "manifest.json" in err and f"field {field}" in err and says in err, err


@pytest.mark.parametrize("option, which", [
    ("trn2", 'of platform trn2 (hw_generation 3, the preset of options.topology "trn2": the '
             "manifest records no platform; seed 000 §3.4)"),
    ("t.json", "of any platform (the manifest records none; seed 000 §3.4)"),
], ids=["preset", "topology-file"])
def test_a_manifest_without_the_platform_still_caps_at_2048(lowered, tmp_path, option, which):
    """Without the platform keys a descriptor over every generation's cap (4096 bf16
    elements = W2 0x2000, above seed 000 §3.4's 2048) is still refused: held to the preset's
    cap (trn2: 2048), or, lowered on a topology file, whose generation the manifest then
    does not hold, to the largest, 2048."""
    out = _copy(lowered["trn2"], tmp_path)
    _edit_topology(out, **dict.fromkeys(PLATFORM_KEYS))
    _edit_options(out, option)
    path = out / "rank-0000" / "cce.bin"
    data = bytearray(path.read_bytes())
    assert struct.unpack_from("<I", data, W2)[0] == _first_w2(2048) == 0x1000
    struct.pack_into("<I", data, W2, 0x2000)
    path.write_bytes(bytes(data))
    err = _simulate_error(out)
    for part in ("rank 0", "artifact cce.bin", "record 0", "field w2", "4096 elements",
                 f"2048 elements per CCE descriptor {which}"):
        assert part in err, err


@pytest.mark.parametrize("name, other, own", [("trn2", "GROUPED_MESH", "MESH_TRN2"),
                                              ("trn1", "MESH_TRN2", "GROUPED_MESH")])
def test_a_presets_mesh_sub_type_is_the_presets(lowered, tmp_path, name, other, own):
    """docs/TOPOLOGY.md §1: trn2's intra-node mesh is MESH_TRN2, trn1's GROUPED_MESH; an
    output lowered on the preset (options.topology its name) and recording another
    ``mesh_sub_type`` is refused, naming the key; the preset's own simulates."""
    assert _manifest(lowered[name])["topology"]["mesh_sub_type"] == own
    out = _copy(lowered[name], tmp_path)
    _edit_topology(out, mesh_sub_type=other)
    err = _simulate_error(out)
    assert "field topology.mesh_sub_type" in err, err
    assert (f"topology.mesh_sub_type should be \"{own}\", {name}'s, not \"{other}\" (the "
            "platform of "
            f'options.topology "{name}": docs/TOPOLOGY.md §1)') in err, err

"""The `boreas` command line as a user runs it: real process, exit codes, output."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DATA = ROOT / "tests" / "data" / "borealis"
EXAMPLES = ROOT / "examples" / "xml"


def boreas(*args, cwd=None, env=None):
    full_env = {k: v for k, v in os.environ.items() if k != "BOREAS_CATALOG"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "boreas.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=full_env, timeout=60)


def test_validate_real_borealis_pair():
    r = boreas("validate", DATA / "move_Move.xml", DATA / "move_MoveDeploy.xml")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("valid:")


def test_validate_prints_every_problem_and_exits_2(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<borealis>\n<input stream="A" schema="Nope"/>\n'
                   '<box name="b" type="fliter"><in stream="A"/><out stream="B"/></box>\n</borealis>')
    worse = tmp_path / "worse.xml"
    worse.write_text("<deploy><node endpoint=':1' query='x'></deploy>")
    r = boreas("validate", bad, worse)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert any(line.startswith(f"{worse}:1:") and "malformed XML" in line for line in lines)
    r = boreas("validate", bad)
    assert r.returncode == 2
    assert f"{bad}:2: /borealis/input: input stream 'A' names unknown schema 'Nope'" in r.stderr
    assert f"{bad}:3: /borealis/box: unknown box type 'fliter'" in r.stderr
    assert "nothing was changed" in r.stderr


def test_validate_against_catalog_then_apply_show_export(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    add = [DATA / "deploy_Add.xml", DATA / "deploy_AddDeploy.xml"]
    r = boreas("validate", "--catalog", url, *add)
    assert r.returncode == 2 and "'Result'" in r.stderr
    r = boreas("catalog", "apply", DATA / "deploy_Deploy.xml", DATA / "deploy_DeployDeploy.xml", "--catalog", url)
    assert r.returncode == 0, r.stderr
    assert "committed catalog version 1" in r.stdout
    assert boreas("validate", "--catalog", url, *add).returncode == 0
    r = boreas("catalog", "apply", *add, "--catalog", url)
    assert r.returncode == 0 and "version 2" in r.stdout
    r = boreas("catalog", "show", "--catalog", url)
    assert "2 boxes" in r.stdout and "node localhost:15000: box1, box2" in r.stdout
    out = tmp_path / "export"
    r = boreas("catalog", "export", "--catalog", url, "-o", out)
    assert r.returncode == 0, r.stderr
    # The export is itself a valid submission that rebuilds the same catalog.
    url2 = f"sqlite:///{tmp_path}/c2.db"
    r = boreas("catalog", "apply", out / "application.xml", out / "deployment.xml", "--catalog", url2)
    assert r.returncode == 0, r.stderr
    assert boreas("catalog", "show", "--catalog", url2).stdout.replace("version 1", "version 2") == \
        boreas("catalog", "show", "--catalog", url).stdout


def test_default_catalog_is_a_file_in_the_working_directory(tmp_path):
    r = boreas("catalog", "apply", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "boreas-catalog.db").exists()
    r = boreas("catalog", "show", cwd=tmp_path)
    assert "node localhost:15002: match" in r.stdout


def test_catalog_env_variable(tmp_path):
    env = {"BOREAS_CATALOG": f"sqlite:///{tmp_path}/env.db"}
    assert boreas("catalog", "apply", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml",
                  env=env, cwd=tmp_path).returncode == 0
    assert (tmp_path / "env.db").exists()


def test_bad_catalog_url_is_a_clear_error():
    r = boreas("catalog", "show", "--catalog", "postgres://nope")
    assert r.returncode == 1
    assert "unknown catalog URL" in r.stderr


def test_missing_file():
    r = boreas("validate", "/nonexistent/app.xml")
    assert r.returncode == 2
    assert "/nonexistent/app.xml" in r.stderr and "cannot read file" in r.stderr


@pytest.mark.zookeeper
def test_apply_and_show_on_zookeeper(zookeeper_server):
    url = f"zk://{zookeeper_server}/cli-test"
    r = boreas("catalog", "apply", EXAMPLES / "sensor_chain.xml", EXAMPLES / "sensor_chain_deploy.xml", "--catalog", url)
    assert r.returncode == 0, r.stderr
    r = boreas("catalog", "show", "--catalog", url)
    assert "3 boxes" in r.stdout and "localhost:15002: per_sensor" in r.stdout

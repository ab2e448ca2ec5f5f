"""``mpisim exec``: process-level things a rank may do must end that rank, not the simulator, and be reported."""

from __future__ import annotations

import os

from tests.hostile.helpers import cli


def _exec(tmp_path, source: str, *options: str, ranks: int = 4) -> tuple[int, str, str]:
    program = tmp_path / "prog.py"
    program.write_text(source)
    return cli("exec", "-n", str(ranks), *options, str(program))


def test_os_exit_in_one_rank_is_a_failed_job_not_a_silent_success(tmp_path):
    code, _, err = _exec(tmp_path, "import os\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n"
                                   "if c.rank == 1:\n    os._exit(0)\nc.Barrier()\n")
    assert code == 1, err
    assert "rank 1 has finished without calling it" in err


def test_sys_exit_256_is_a_failure_not_status_zero(tmp_path):
    code, _, err = _exec(tmp_path, "import sys\nfrom mpi4py import MPI\nif MPI.COMM_WORLD.rank == 1:\n    sys.exit(256)\n")
    assert code == 1 and "exited with status 256" in err


def test_an_exception_whose_str_raises_is_reported_not_an_internal_error(tmp_path):
    code, _, err = _exec(tmp_path, "from mpi4py import MPI\nclass E(Exception):\n    def __str__(self):\n"
                                   "        raise RuntimeError\nif MPI.COMM_WORLD.rank == 1:\n    raise E()\n")
    assert code == 1 and "internal error" not in err
    assert "rank 1 raised E: <str() of this exception raised RuntimeError>" in err


def test_escape_sequences_in_a_message_do_not_reach_the_terminal_raw(tmp_path):
    code, _, err = _exec(tmp_path, "from mpi4py import MPI\nif MPI.COMM_WORLD.rank == 1:\n"
                                   "    raise ValueError(chr(27) + '[2J' + chr(7))\n")
    assert code == 1 and "\x1b" not in err and "\x07" not in err
    assert "raised ValueError: \\x1b[2J\\x07" in err


def test_a_rank_changing_directory_does_not_move_the_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _exec(tmp_path, "import os\nfrom mpi4py import MPI\nos.makedirs('sub', exist_ok=True)\n"
                                   "os.chdir('sub')\nMPI.COMM_WORLD.Barrier()\n", "-o", "out", "--json", ranks=2)
    os.chdir(tmp_path)
    assert code == 0, err
    assert (tmp_path / "out" / "results.json").is_file()
    assert not (tmp_path / "sub" / "out").exists()


def test_an_mpi_call_from_a_thread_says_so(tmp_path):
    code, out, err = _exec(tmp_path, "import threading\nfrom mpi4py import MPI\nfound = []\ndef f():\n    try:\n"
                                     "        MPI.COMM_WORLD.Barrier()\n    except Exception as e:\n"
                                     "        found.append(str(e))\nt = threading.Thread(target=f)\nt.start()\n"
                                     "t.join()\nprint(found[0])\n", ranks=1)
    assert code == 0, err
    assert "called from a thread the program started" in out


def test_a_rank_signalling_itself_is_a_failed_rank_not_the_end_of_the_simulator(tmp_path):
    code, _, err = _exec(tmp_path, "import os, signal\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n"
                                   "if c.rank == 1:\n    os.kill(os.getpid(), signal.SIGTERM)\nc.Barrier()\n")
    assert code == 143 and "rank 1 exited with status 143" in err

"""What a program may do with its buffers and objects around a call, as under mpiexec.

Each program asserts what MPICH with mpi4py gives (each was run under both); a failed
assertion fails the run with the rank's traceback, which the test shows.
"""

from __future__ import annotations

import pytest

from tests.compat.test_mpi4py_api import ok, run

#: Elements per rank: eager (below laptop-shm's 8112 B eager limit, MPICH's) and rendezvous.
SIZES = [4, 4096]


@pytest.mark.parametrize("count", SIZES)
def test_send_buffers_changed_after_a_blocking_collective_returns_do_not_change_its_result(tmp_path, count):
    # A leaf of a gather returns once its block has left; the root may receive it later. MPI
    # lets the leaf change its buffer at once: the root must still get what was sent.
    ok(tmp_path, f"""\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p, n = comm.rank, comm.size, {count}
        counts = [n] * p
        out = np.zeros(n * p)
        calls = {{
            "Reduce": lambda mine: comm.Reduce(mine, out[:n], op=MPI.SUM, root=0),
            "Gather": lambda mine: comm.Gather(mine, out, root=0),
            "Gatherv": lambda mine: comm.Gatherv(mine, [out, counts, None, MPI.DOUBLE], root=0),
            "Allgather": lambda mine: comm.Allgather(mine, out),
            "Allgatherv": lambda mine: comm.Allgatherv(mine, [out, counts, None, MPI.DOUBLE]),
            "Alltoall": lambda mine: comm.Alltoall(np.tile(mine, p), out),
        }}
        for name, call in calls.items():
            mine = np.zeros(n)
            for step in range(3):
                mine[:] = r + 10 * step
                call(mine)
                mine[:] = -1.0   # allowed the moment the call returns
                want = np.repeat(np.arange(p, dtype=float) + 10 * step, n)
                if name == "Reduce":
                    want = np.full(n, want.sum() / n)
                    got = out[:n]
                else:
                    got = out
                if r == 0 or name.startswith("All"):
                    assert np.array_equal(got, want), (name, step, got[::n])
        data = np.arange(n * p, dtype=float)
        got = np.zeros(n)
        for step in range(3):
            comm.Scatter(data if r == 0 else None, got, root=0)
            data[:] = -1.0
            assert np.array_equal(got, np.arange(r * n, (r + 1) * n, dtype=float)), (step, got[:2])
            data[:] = np.arange(n * p, dtype=float)
        """)


def test_lowercase_collectives_return_copies_never_the_callers_object(tmp_path):
    out = ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        x = [r]
        same = {
            "bcast": comm.bcast(x, root=0) is x,
            "scatter": comm.scatter([x] * p if r == 0 else None, root=0) is x,
            "allgather": comm.allgather(x)[r] is x,
            "alltoall": comm.alltoall([x] * p)[r] is x,
            "gather": (comm.gather(x, root=0) or [None] * p)[r] is x,
            "reduce": comm.reduce(x, op=MPI.MAX, root=0) is x,
            "allreduce": comm.allreduce(x, op=MPI.MAX) is x,
        }
        assert not any(same.values()), same
        item = [r, 0]
        got = comm.allgather(item)
        item.append("changed")   # the caller's object changes; the result must not
        assert got == [[k, 0] for k in range(p)], got
        print("ok", r)
        """)
    assert sorted(out.split("\n")) == ["", "ok 0", "ok 1", "ok 2", "ok 3"]


def test_each_rank_has_its_own_random_generators_logging_environment_and_stdout(tmp_path):
    # Under mpiexec each rank is a process: np.random.seed(rank), random.seed(rank),
    # logging.basicConfig, os.environ and sys.stdout are its own. Seeded draws equal a lone
    # process's; so do the launcher's variables (MPICH's hydra sets PMI_RANK, PMI_SIZE).
    out = ok(tmp_path, f"""\
        import logging, os, random, sys
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        np.random.seed(r)
        random.seed(r)
        logging.basicConfig(level=logging.INFO, format=f"[rank {{r}}] %(message)s", stream=sys.stdout)
        os.environ["MY_RANK"] = str(r)
        comm.Barrier()   # every rank has set its own state before any reads it back
        assert np.random.randint(0, 1000, 3).tolist() == np.random.RandomState(r).randint(0, 1000, 3).tolist()
        assert random.random() == random.Random(r).random()
        assert os.environ["MY_RANK"] == str(r) and os.getenv("MY_RANK") == str(r)
        assert os.environ["PMI_RANK"] == str(r) and os.environ["PMI_SIZE"] == str(p)
        logging.info("hello")
        with open(f"{tmp_path}/log{{r}}.txt", "w") as log:
            sys.stdout = log
            print("to my file", r)
            comm.Barrier()   # the others print to their files meanwhile
        """)
    assert sorted(line for line in out.splitlines() if line) == [f"[rank {r}] hello" for r in range(4)]
    assert [(tmp_path / f"log{r}.txt").read_text() for r in range(4)] == [f"to my file {r}\n" for r in range(4)]


def test_unseeded_generators_differ_between_ranks_and_repeat_between_runs(tmp_path):
    program = """\
        import random
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        draws = comm.gather((random.random(), float(np.random.rand())), root=0)
        if comm.rank == 0:
            assert len(set(draws)) == comm.size, draws
            print(draws)
        """
    assert ok(tmp_path, program) == ok(tmp_path, program)


def test_a_module_the_program_imports_from_another_folder_is_each_ranks_own(tmp_path, tmp_path_factory):
    # A course's helper module found through sys.path: its module-level rank is each rank's.
    helpers = tmp_path_factory.mktemp("common")  # beside the program's folder, not in it
    (helpers / "course_helper.py").write_text("from mpi4py import MPI\nRANK = MPI.COMM_WORLD.Get_rank()\ncalls = []\n")
    ok(tmp_path, f"""\
        import sys
        sys.path.insert(0, {str(helpers)!r})
        import course_helper
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        course_helper.calls.append(comm.rank)
        comm.Barrier()
        assert course_helper.RANK == comm.rank, course_helper.RANK
        assert course_helper.calls == [comm.rank], course_helper.calls
        assert comm.allreduce(course_helper.RANK) == sum(range(comm.size))
        """)


def test_when_one_rank_fails_the_others_run_on_until_the_launcher_stops_them(tmp_path):
    # Under mpiexec the ranks already past the call the failed rank left still print; ranks
    # waiting for it (here in a polling loop that would never end) are stopped.
    code, out, err = run(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r = comm.rank
        total = comm.allreduce(r)
        print(f"rank {r}: total {total}")
        if r == 0:
            raise ValueError("rank 0 gives up")
        if r == 1:
            while not comm.Iprobe(source=0):   # nothing will ever come
                pass
        """)
    assert code == 1
    assert sorted(out.splitlines()) == [f"rank {r}: total 6" for r in range(4)]
    assert "rank 0 raised ValueError: rank 0 gives up" in err
    assert "the other ranks when the launcher stopped them:" in err and "rank 1:" in err


def test_a_deadlock_of_receives_from_any_source_names_no_false_cycle(tmp_path):
    # Each rank waits for *some* rank, not for a particular one: no cycle of waits exists to name.
    code, _, err = run(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        msg = comm.recv(source=MPI.ANY_SOURCE, tag=0)
        comm.send(comm.rank, dest=(comm.rank + 1) % comm.size, tag=0)
        """)
    assert code == 1
    assert "deadlock: 4 rank(s) blocked" in err
    assert "cycle of waits" not in err
    assert "every blocked rank waits for a message from any rank" in err


def test_groups_and_the_communicators_made_from_them(tmp_path):
    # What MPICH gives for the same calls (checked under mpiexec -n 6).
    ok(tmp_path, """\
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        r, p = comm.rank, comm.size
        world = comm.Get_group()
        evens, odds = world.Incl(list(range(0, p, 2))), world.Excl(list(range(0, p, 2)))
        assert (evens.Get_size(), odds.size) == (3, 3)
        assert evens.Get_rank() == (r // 2 if r % 2 == 0 else MPI.UNDEFINED)
        assert MPI.Group.Translate_ranks(odds, [0, 1, 2], world) == [1, 3, 5]
        assert MPI.Group.Translate_ranks(world, [0, 1, 2], odds) == [MPI.UNDEFINED, 0, MPI.UNDEFINED]
        assert MPI.Group.Union(odds, evens).Translate_ranks([0, 3], world) == [1, 0]
        assert MPI.Group.Intersection(world, odds).Compare(odds) == MPI.IDENT
        assert MPI.Group.Difference(world, odds).Compare(evens) == MPI.IDENT
        assert world.Incl([1, 0, 2, 3, 4, 5]).Compare(world) == MPI.SIMILAR
        backwards = comm.Create(world.Incl([5, 3, 1]))   # collective over comm; order from the group
        if r % 2:
            assert (backwards.Get_rank(), backwards.Get_size()) == ((5 - r) // 2, 3)
            assert backwards.allgather(r) == [5, 3, 1]
            mine = comm.Create_group(odds, tag=7)        # only the members call it
            assert mine.Get_rank() == r // 2 and mine.allreduce(r) == 9
            mine.Free()
        else:
            assert backwards == MPI.COMM_NULL
        """, 6)


def test_a_root_outside_the_communicator_is_mpi_err_root_in_every_rooted_call(tmp_path):
    # What MPICH raises (checked under mpiexec -n 2), before anything is sent.
    out = ok(tmp_path, """\
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        p = comm.size
        calls = {
            "Gatherv": lambda: comm.Gatherv(np.zeros(1), [np.zeros(p), [1] * p, None, MPI.DOUBLE], root=p),
            "Scatterv": lambda: comm.Scatterv([np.zeros(p), [1] * p, None, MPI.DOUBLE], np.zeros(1), root=p),
            "Reduce": lambda: comm.Reduce(np.zeros(1), np.zeros(1), root=p),
            "bcast": lambda: comm.bcast(1, root=p),
            "gather": lambda: comm.gather(1, root=p),
            "scatter": lambda: comm.scatter([1] * p, root=p),
            "reduce": lambda: comm.reduce(1, root=p),
        }
        for name, call in calls.items():
            try:
                call()
            except MPI.Exception as error:
                assert error.Get_error_class() == MPI.ERR_ROOT, (name, error)
            else:
                raise AssertionError(f"{name} with a root outside the communicator raised nothing")
        print("refused", comm.rank)
        """, 2)
    assert sorted(out.split()) == ["0", "1", "refused", "refused"]

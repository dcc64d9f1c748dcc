"""mpi4py_check.py - prun's own checks of mpi4py 4 with Open MPI 5 (Debian 13).

Run by every rank of a job: `prun -n N python3 mpi4py_check.py` (N >= 1).
What it checks is what a launcher provides an MPI library through PMIx:
process sets (MPI Sessions), groups made into communicators (PMIx group
constructs and destructs with context ids), spawn of this same interpreter,
ports, published names and Comm.Join between ranks. Each rank runs every
check with unittest and ends with one line on stdout:

    mpi4py_check: rank R ran T checks: OK
    mpi4py_check: rank R ran T checks: FAILED (names)

A child spawned by the spawn check runs `mpi4py_check.py child` and prints
nothing.
"""
import socket
import sys
import unittest

from mpi4py import MPI

WORLD = MPI.COMM_WORLD
BUILTIN_PSETS = ["mpi://WORLD", "mpi://SELF", "mpix://SHARED"]


def error_class(exc):
    return exc.Get_error_class() if isinstance(exc, MPI.Exception) else None


class Sessions(unittest.TestCase):
    def setUp(self):
        self.session = MPI.Session.Init()

    def tearDown(self):
        self.session.Finalize()

    def test_count_and_names_agree(self):
        # A job whose contexts name no process set has MPI's three.
        n = self.session.Get_num_psets()
        names = [self.session.Get_nth_pset(i) for i in range(n)]
        self.assertEqual(names, BUILTIN_PSETS)
        with self.assertRaises(MPI.Exception) as cm:
            self.session.Get_nth_pset(n)
        self.assertEqual(error_class(cm.exception), MPI.ERR_ARG)

    def test_pset_sizes(self):
        want = {"mpi://WORLD": WORLD.Get_size(), "mpi://SELF": 1}
        for name, size in want.items():
            info = self.session.Get_pset_info(name)
            self.assertEqual(info.Get("mpi_size"), str(size), name)
            info.Free()

    def test_unknown_pset(self):
        with self.assertRaises(MPI.Exception) as cm:
            self.session.Get_pset_info("no-such-set")
        self.assertEqual(error_class(cm.exception), MPI.ERR_ARG)
        with self.assertRaises(MPI.Exception):
            self.session.Create_group("no-such-set")

    def test_groups_of_psets(self):
        for name in BUILTIN_PSETS:
            group = self.session.Create_group(name)
            self.assertGreaterEqual(group.Get_size(), 1, name)
            group.Free()

    def test_comm_from_world_pset(self):
        group = self.session.Create_group("mpi://WORLD")
        comm = MPI.Intracomm.Create_from_group(group, "org.prun.check.world")
        self.assertEqual(comm.Get_size(), WORLD.Get_size())
        n = comm.Get_size()
        self.assertEqual(comm.allreduce(comm.Get_rank()), n * (n - 1) // 2)
        comm.Free()
        group.Free()


class Groups(unittest.TestCase):
    def test_comm_from_group_halves(self):
        size, rank = WORLD.Get_size(), WORLD.Get_rank()
        world = WORLD.Get_group()
        half = [r for r in range(size) if (r < (size + 1) // 2) == (rank < (size + 1) // 2)]
        group = world.Incl(half)
        comm = MPI.Intracomm.Create_from_group(group, "org.prun.check.half")
        self.assertEqual(comm.Get_size(), len(half))
        self.assertEqual(comm.allreduce(rank), sum(half))
        comm.Free()
        group.Free()
        world.Free()

    def test_intercomm_from_groups(self):
        size, rank = WORLD.Get_size(), WORLD.Get_rank()
        if size < 2:
            return  # no two sides
        world = WORLD.Get_group()
        low = list(range(size // 2))
        high = list(range(size // 2, size))
        mine, other = (low, high) if rank in low else (high, low)
        local, remote = world.Incl(mine), world.Incl(other)
        inter = MPI.Intercomm.Create_from_groups(local, 0, remote, 0, "org.prun.check.inter")
        self.assertEqual(inter.Get_remote_size(), len(other))
        # Each side's leader sends its side's size to the other side.
        if inter.Get_rank() == 0:
            got = inter.sendrecv(len(mine), dest=0, source=0)
            self.assertEqual(got, len(other))
        inter.Free()
        local.Free()
        remote.Free()
        world.Free()


class Dynamic(unittest.TestCase):
    def test_spawn_self(self):
        # This interpreter, spawned: the launcher must resolve it as the
        # ranks see it.
        children = WORLD.Spawn(sys.executable, args=[__file__, "child"], maxprocs=2, root=0)
        self.assertEqual(children.Get_remote_size(), 2)
        merged = children.Merge(high=False)
        self.assertEqual(merged.Get_size(), WORLD.Get_size() + 2)
        total = merged.allreduce(1)
        self.assertEqual(total, WORLD.Get_size() + 2)
        merged.Free()
        children.Disconnect()

    def test_port_publish_lookup(self):
        size, rank = WORLD.Get_size(), WORLD.Get_rank()
        if size < 2:
            return
        side = WORLD.Split(rank % 2, rank)
        name = "org.prun.check.%d" % MPI.Get_version()[0]
        if rank % 2 == 0:
            port = MPI.Open_port() if side.Get_rank() == 0 else None
            if side.Get_rank() == 0:
                MPI.Publish_name(name, port)
            WORLD.barrier()
            inter = side.Accept(port, root=0)
        else:
            WORLD.barrier()
            port = MPI.Lookup_name(name) if side.Get_rank() == 0 else None
            inter = side.Connect(port, root=0)
        self.assertEqual(inter.Get_remote_size(), size - side.Get_size())
        inter.Disconnect()
        WORLD.barrier()
        if rank == 0:
            MPI.Unpublish_name(name, port)
            MPI.Close_port(port)
        side.Free()

    def test_join(self):
        size, rank = WORLD.Get_size(), WORLD.Get_rank()
        if size < 2:
            return
        host = socket.gethostname()
        fd, srv = None, None
        if rank == 0:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.bind((host, 0))
            srv.listen(1)
            WORLD.send(srv.getsockname(), dest=1)
            conn, _ = srv.accept()
            fd = conn
        elif rank == 1:
            addr = WORLD.recv(source=0)
            fd = socket.create_connection(addr)
        if rank in (0, 1):
            inter = MPI.Comm.Join(fd.fileno())
            self.assertEqual(inter.Get_remote_size(), 1)
            inter.Disconnect()
            fd.close()
            if srv is not None:
                srv.close()
        WORLD.barrier()


def child():
    parent = MPI.Comm.Get_parent()
    merged = parent.Merge(high=True)
    merged.allreduce(1)
    merged.Free()
    parent.Disconnect()


def main():
    if sys.argv[1:] == ["child"]:
        child()
        return 0
    rank = WORLD.Get_rank()
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]))
    bad = [str(t) for t, _ in result.failures + result.errors]
    verdict = "OK" if not bad else "FAILED (%s)" % ", ".join(bad)
    print("mpi4py_check: rank %d ran %d checks: %s" % (rank, result.testsRun, verdict), flush=True)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

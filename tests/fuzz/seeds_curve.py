"""Seeds for fuzz_curve: curve files for bench/curve.c, valid and not (the
shipped seed curve, one column, comments and CRLF, every kind of error).
Usage: seeds_curve.py DIR"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = [open(os.path.join(HERE, "..", "..", "bench", "curves", "seed.csv"), "rb").read(),
             b"ids,threads,queries_per_second\n1,1,100\n1,10,500\n",
             b"# c\r\n 10 , 5 , 200.5 \r\n1,5,1e3\r\n1,1,500",
             b"1,4,400\n1,8,600\n20,40,7400\n20,100,3000\n",
             b"1,1,abc\n", b"1,2\n", b"1,1,1,1\n", b"1,5,1\n1,5,2\n", b"1,1,1\nids,threads,queries_per_second\n",
             b"0,1,1\n", b"1,1,0\n", b"1,1,inf\n", b"1,1,1e308\n", b"1,2147483648,5\n", b"",
             b"1,1,1\x00\n"]
    for i, s in enumerate(seeds):
        with open(os.path.join(out, f"seed-{i:02d}"), "wb") as f:
            f.write(s)


if __name__ == "__main__":
    main(sys.argv[1])

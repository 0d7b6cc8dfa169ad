// Check that Node's process.hrtime and Python's clock_gettime(CLOCK_MONOTONIC) read one clock.
//
//     node clock_check.mjs ROUNDS -- PYTHON
//
// libuv's uv_hrtime() (behind process.hrtime) reads CLOCK_MONOTONIC on Linux; this measures it.
// A Python child answers each line we write with clock_gettime_ns(CLOCK_MONOTONIC) and, for
// comparison, CLOCK_BOOTTIME and CLOCK_REALTIME. For each round we stamp just before the write and
// just after the answer: the same clock must fall inside that bracket every time.
import { spawn } from "node:child_process";
import process from "node:process";

const rounds = Number(process.argv[2]);
const python = process.argv[process.argv.indexOf("--") + 1];
const program = `
import sys, time
for _ in sys.stdin:
    c = time.clock_gettime_ns
    print(c(time.CLOCK_MONOTONIC), c(time.CLOCK_BOOTTIME), c(time.CLOCK_REALTIME), flush=True)
`;
const child = spawn(python, ["-c", program], { stdio: ["pipe", "pipe", "inherit"] });
child.stdout.setEncoding("utf8");
let buffered = "";
let waiter = null;
child.stdout.on("data", (chunk) => {
  buffered += chunk;
  const newline = buffered.indexOf("\n");
  if (newline >= 0 && waiter) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    const resolve = waiter;
    waiter = null;
    resolve(line.split(" ").map(BigInt));
  }
});
const ask = () =>
  new Promise((resolve) => {
    waiter = resolve;
    child.stdin.write("?\n");
  });

const names = ["monotonic", "boottime", "realtime"];
const inside = { monotonic: 0, boottime: 0, realtime: 0 };
const brackets = [];
await ask(); // warm up the child
for (let i = 0; i < rounds; i++) {
  const before = process.hrtime.bigint();
  const stamps = await ask();
  const after = process.hrtime.bigint();
  brackets.push(Number(after - before) / 1000);
  stamps.forEach((stamp, j) => {
    if (before <= stamp && stamp <= after) inside[names[j]] += 1;
  });
}
child.stdin.end();
brackets.sort((a, b) => a - b);
process.stdout.write(
  JSON.stringify({
    rounds,
    inside,
    bracket_us_median: brackets[Math.floor(brackets.length / 2)],
    bracket_us_max: brackets[brackets.length - 1],
    libuv: process.versions.uv,
    node: process.version,
  }) + "\n",
);
process.exit(0);

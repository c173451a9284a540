#!/usr/bin/env python3
"""See and change the throughput mode of the EFS file system that holds
students' files, and measure what a change does.

    python deploy/efs_throughput.py status FS_ID [--hours 3] [--region R]
    python deploy/efs_throughput.py set FS_ID --mode provisioned --mibps 64 [--dry-run]
    python deploy/efs_throughput.py set FS_ID --mode elastic|bursting [--dry-run]
    python deploy/efs_throughput.py measure FS_ID --dir /mnt/efs/bench --mode elastic [--out FOLDER]

`status` prints the mode, the provisioned MiB/s, the size and the CloudWatch
metrics that tell whether the mode fits the load (burst credits, permitted
and metered throughput, PercentIOLimit, client connections).

`set` sends one UpdateFileSystem and waits until the file system is
`available` in the new mode. AWS allows a throughput-mode change, or a
decrease of provisioned throughput, only once every 24 hours after the last
such change: a refused change is reported with the time AWS names, never
retried.

`measure` runs the EFS benchmark (loadtest/efs_bench.py) before and after
the change and writes both results, their comparison and a log of the steps
into one folder.

Exit codes: 0 done (or nothing to do), 1 error, 2 bad arguments,
3 refused by the 24-hour rule (try again later), 4 timed out waiting.
"""
import argparse
import datetime as dt
import json
import math
import os
import random
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODES = ("bursting", "provisioned", "elastic")
# botocore's model of UpdateFileSystem gives ProvisionedThroughputInMibps
# {"min": 1.0}; the API reference says "Valid values are 1-3414 MiBps, with
# the upper limit depending on Region" (a lower regional limit is refused by
# AWS with its own message, which we print).
MIBPS_MIN = 1.0
MIBPS_MAX = 3414.0

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TOO_SOON, EXIT_TIMEOUT = 0, 1, 2, 3, 4

RULE_24H = ("AWS allows a throughput-mode change, or a decrease of provisioned throughput, "
            "only once every 24 hours after the last such change")

# (metric, how one datapoint becomes a value, unit shown, what it tells).
# EFS publishes these every minute under AWS/EFS with dimension FileSystemId.
METRICS = (
    ("BurstCreditBalance", "stat", "bytes",
     "burst credits left; bursting mode spends them above its baseline"),
    ("PermittedThroughput", "stat", "bytes/s", "throughput the file system may use now"),
    # Sum over a period divided by its length is the metered throughput;
    # Average would be the size of one I/O.
    ("MeteredIOBytes", "rate", "bytes/s", "metered throughput; reads count one third"),
    ("PercentIOLimit", "stat", "%", "how close to the I/O limit; General Purpose mode only"),
    # AWS documents only Sum as valid: connections per minute of the period.
    ("ClientConnections", "per-minute", "connections", "NFS client connections"),
)


class Failure(Exception):
    """A one-line error for the operator, and the exit code that goes with it."""

    def __init__(self, message, code=EXIT_ERROR):
        super().__init__(message)
        self.code = code


# --- AWS clients and errors ------------------------------------------------

def make_clients(region):
    """EFS and CloudWatch clients.

    Standard retry mode, because botocore's default ("legacy") mode retries
    every HTTP 429, and EFS answers the 24-hour rule with TooManyRequests
    (429): a refused change would be sent four more times, silently. Standard
    mode leaves modeled errors like that one to us and still retries
    ThrottlingException and network errors.
    """
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 3})
    return (boto3.client("efs", region_name=region, config=config),
            boto3.client("cloudwatch", region_name=region, config=config))


def error_code(err):
    return err.response.get("Error", {}).get("Code") or err.response.get("ErrorCode") or ""


def error_message(err):
    return err.response.get("Error", {}).get("Message") or err.response.get("Message") or str(err)


def is_24_hour_rule(err):
    """Whether `err` is AWS refusing a change under the 24-hour rule.

    EFS uses TooManyRequests for that rule ("You have reached the maximum
    number of throughput mode changes or provisioned throughput value
    decreases. Wait until 2023-12-29T12:51:32Z UTC and try again."). Only a
    TooManyRequests that plainly speaks of a request rate is a rate limit.
    """
    if error_code(err) != "TooManyRequests":
        return False
    text = error_message(err).lower()
    rate_limit = re.search(r"\brate (exceeded|limit)", text)
    about_changes = re.search(r"throughput mode|decreas|wait until|24 hours", text)
    return bool(about_changes or not rate_limit)


def is_rate_limit(err):
    code = error_code(err)
    if code in ("ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"):
        return True
    return code == "TooManyRequests" and not is_24_hour_rule(err)


def next_change_allowed(message):
    """The time named in a 24-hour-rule message, as an aware UTC datetime, or None."""
    m = re.search(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.\d+)?\s*(Z|UTC|[+-]\d{2}:?\d{2})?",
                  message)
    if m:
        zone = m.group(3) or "Z"
        zone = "+00:00" if zone in ("Z", "UTC") else zone
        if re.fullmatch(r"[+-]\d{4}", zone):
            zone = zone[:3] + ":" + zone[3:]
        clock = m.group(2) if m.group(2).count(":") == 2 else m.group(2) + ":00"
        try:
            return dt.datetime.fromisoformat(f"{m.group(1)}T{clock}{zone}").astimezone(dt.timezone.utc)
        except ValueError:
            return None
    # The `date` style some AWS messages use: "Fri Oct 25 17:30:11 UTC 2024".
    m = re.search(r"\w{3} (\w{3}) +(\d{1,2}) (\d{2}:\d{2}:\d{2}) UTC (\d{4})", message)
    if m:
        try:
            return dt.datetime.strptime(" ".join(m.groups()), "%b %d %H:%M:%S %Y").replace(
                tzinfo=dt.timezone.utc)
        except ValueError:
            return None
    return None


def call_with_backoff(fn, *, sleep, attempts=6, base=1.0, cap=30.0, log=None, **kwargs):
    """fn(**kwargs), retried with exponential backoff while AWS says "slow down".

    Only rate limits are retried: the 24-hour rule, a wrong id or a bad
    request would fail the same way every time.
    """
    from botocore.exceptions import ClientError

    for attempt in range(1, attempts + 1):
        try:
            return fn(**kwargs)
        except ClientError as err:
            if not is_rate_limit(err) or attempt == attempts:
                raise
            # Full jitter, so that several operators' scripts do not retry in step.
            delay = random.uniform(0.5, 1.0) * min(cap, base * 2 ** (attempt - 1))
            if log:
                log(f"AWS is throttling ({error_code(err)}: {error_message(err)}); "
                    f"retry {attempt} of {attempts - 1} in {delay:.1f} s")
            sleep(delay)


def describe(efs, fs_id, sleep):
    """The file system's description (describe_file_systems), or Failure."""
    from botocore.exceptions import ClientError

    try:
        found = call_with_backoff(efs.describe_file_systems, sleep=sleep, FileSystemId=fs_id)["FileSystems"]
    except ClientError as err:
        if error_code(err) == "FileSystemNotFound":
            raise Failure(f"file system {fs_id} not found in {efs.meta.region_name}: "
                          f"{error_message(err)}") from None
        raise Failure(f"describe_file_systems failed: {error_code(err)}: {error_message(err)}") from None
    if not found:
        raise Failure(f"file system {fs_id} not found in {efs.meta.region_name}")
    return found[0]


# --- formatting ------------------------------------------------------------

def human_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def show_value(value, unit):
    if unit == "bytes":
        return human_bytes(value)
    if unit == "bytes/s":
        return f"{value / 2 ** 20:.2f} MiB/s"
    if unit == "%":
        return f"{value:.1f} %"
    return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"


def describe_mode(fs):
    mode = fs.get("ThroughputMode", "bursting")
    if mode == "provisioned":
        return f"provisioned {fs.get('ProvisionedThroughputInMibps', 0):g} MiB/s"
    return mode


def state_line(fs):
    size = fs.get("SizeInBytes", {}).get("Value")
    return (f"{fs['FileSystemId']}: {describe_mode(fs)}, size {human_bytes(size) if size is not None else '?'}, "
            f"{fs.get('LifeCycleState', '?')}, performance mode {fs.get('PerformanceMode', '?')}")


def utc(t):
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# --- status ----------------------------------------------------------------

def metric_period(hours):
    # get_metric_statistics returns at most 1,440 datapoints; EFS metrics are
    # per minute, so a window longer than a day needs longer periods.
    return max(60, math.ceil(hours * 3600 / 1440 / 60) * 60)


def summarize(datapoints, kind, period):
    """(min, avg, max, last value, last time) of one metric over the window, or None."""
    points = sorted(datapoints, key=lambda p: p["Timestamp"])
    if not points:
        return None
    if kind == "stat":
        total = sum(p["Sum"] for p in points)
        count = sum(p["SampleCount"] for p in points) or 1
        return (min(p["Minimum"] for p in points), total / count, max(p["Maximum"] for p in points),
                points[-1]["Average"], points[-1]["Timestamp"])
    divisor = period if kind == "rate" else period / 60
    values = [p["Sum"] / divisor for p in points]
    return min(values), sum(values) / len(values), max(values), values[-1], points[-1]["Timestamp"]


def cmd_status(args, efs, cloudwatch, sleep, out):
    fs = describe(efs, args.fs_id, sleep)
    print(state_line(fs), file=out)
    end = dt.datetime.now(dt.timezone.utc)
    start = end - dt.timedelta(hours=args.hours)
    period = metric_period(args.hours)
    print(f"CloudWatch AWS/EFS, {utc(start)} to {utc(end)}, {period} s periods:", file=out)
    for name, kind, unit, meaning in METRICS:
        answer = call_with_backoff(
            cloudwatch.get_metric_statistics, sleep=sleep,
            Namespace="AWS/EFS", MetricName=name,
            Dimensions=[{"Name": "FileSystemId", "Value": args.fs_id}],
            StartTime=start, EndTime=end, Period=period,
            Statistics=["Minimum", "Maximum", "Average", "Sum", "SampleCount"])
        summary = summarize(answer["Datapoints"], kind, period)
        if summary is None:
            print(f"  {name:<20} no datapoints in the last {args.hours:g} h  ({meaning})", file=out)
            continue
        low, mean, high, last, when = summary
        print(f"  {name:<20} min {show_value(low, unit)}, avg {show_value(mean, unit)}, "
              f"max {show_value(high, unit)}, last {show_value(last, unit)} at {utc(when)}  ({meaning})",
              file=out)
    return EXIT_OK


# --- set -------------------------------------------------------------------

def plan_change(fs, mode, mibps):
    """The UpdateFileSystem parameters that move `fs` to `mode`, or None if it is there.

    ThroughputMode is sent only when it changes: a provisioned file system
    that only gets a new MiB/s figure is not changing its mode.
    """
    request = {"FileSystemId": fs["FileSystemId"]}
    current = fs.get("ThroughputMode", "bursting")
    if current != mode:
        request["ThroughputMode"] = mode
    if mode == "provisioned" and (current != mode or float(fs.get("ProvisionedThroughputInMibps", 0)) != mibps):
        request["ProvisionedThroughputInMibps"] = mibps
    return request if len(request) > 1 else None


def counts_against_24h_rule(fs, request):
    if "ThroughputMode" in request:
        return True
    return request.get("ProvisionedThroughputInMibps", math.inf) < float(fs.get("ProvisionedThroughputInMibps", 0))


def cli_equivalent(request):
    line = f"aws efs update-file-system --file-system-id {request['FileSystemId']}"
    if "ThroughputMode" in request:
        line += f" --throughput-mode {request['ThroughputMode']}"
    if "ProvisionedThroughputInMibps" in request:
        line += f" --provisioned-throughput-in-mibps {request['ProvisionedThroughputInMibps']:g}"
    return line


def applied(fs, mode, mibps):
    if fs.get("LifeCycleState") != "available" or fs.get("ThroughputMode", "bursting") != mode:
        return False
    return mode != "provisioned" or float(fs.get("ProvisionedThroughputInMibps", 0)) == mibps


def send_update(efs, request, sleep, log):
    from botocore.exceptions import ClientError

    try:
        return call_with_backoff(efs.update_file_system, sleep=sleep, log=log, **request)
    except ClientError as err:
        code, message = error_code(err), error_message(err)
        if is_24_hour_rule(err):
            when = next_change_allowed(message)
            if when:
                left = when - dt.datetime.now(dt.timezone.utc)
                hours, minutes = divmod(max(0, int(left.total_seconds())) // 60, 60)
                later = f"The next change is allowed at {utc(when)} (in {hours} h {minutes} min)."
            else:
                later = "AWS did not say when the next change is allowed."
            raise Failure(f"AWS refused the change: {RULE_24H}. {later} AWS said: {message}",
                          EXIT_TOO_SOON) from None
        if code == "FileSystemNotFound":
            raise Failure(f"file system {request['FileSystemId']} not found: {message}") from None
        if code == "IncorrectFileSystemLifeCycleState":
            raise Failure(f"the file system is busy (not 'available'); try again in a few minutes: "
                          f"{message}") from None
        raise Failure(f"update_file_system failed: {code}: {message}") from None


def wait_until_applied(efs, fs_id, mode, mibps, timeout, poll, sleep, clock, log):
    """Poll describe_file_systems until the file system is available in the new mode."""
    deadline = clock() + timeout
    last_state = None
    while True:
        fs = describe(efs, fs_id, sleep)
        if applied(fs, mode, mibps):
            return fs
        state = (fs.get("LifeCycleState"), describe_mode(fs))
        if state != last_state:
            log(f"waiting: {state[0]}, {state[1]}")
            last_state = state
        if fs.get("LifeCycleState") in ("error", "deleting", "deleted"):
            raise Failure(f"file system {fs_id} is {fs['LifeCycleState']}")
        remaining = deadline - clock()
        if remaining <= 0:
            raise Failure(f"timed out after {timeout:g} s: {fs_id} is {state[0]}, {state[1]}; "
                          f"check again with: efs_throughput.py status {fs_id}", EXIT_TIMEOUT)
        sleep(min(poll, remaining))


def validate_mode_args(parser, args):
    if args.mode == "provisioned":
        if args.mibps is None:
            parser.error("--mibps is required with --mode provisioned")
        if not MIBPS_MIN <= args.mibps <= MIBPS_MAX:
            parser.error(f"--mibps must be from {MIBPS_MIN:g} to {MIBPS_MAX:g} "
                         "(the upper limit may be lower in some Regions)")
    elif args.mibps is not None:
        parser.error(f"--mibps applies only to --mode provisioned, not {args.mode}")


def change(args, efs, sleep, clock, out, fs=None):
    """Describe, plan, (unless --dry-run) update and wait. Returns (fs before, fs after, request)."""
    def log(line):
        print(line, file=out, flush=True)

    fs = fs or describe(efs, args.fs_id, sleep)
    log("now:  " + state_line(fs))
    request = plan_change(fs, args.mode, args.mibps)
    if request is None:
        log(f"nothing to change: {args.fs_id} already uses {describe_mode(fs)}")
        return fs, fs, None
    log("request: update_file_system " + json.dumps(request, sort_keys=True))
    log("         (" + cli_equivalent(request) + ")")
    if counts_against_24h_rule(fs, request):
        log(f"note: {RULE_24H}; after this change the next one is possible no sooner than "
            f"{utc(dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=24))}.")
    if args.dry_run:
        log("dry run: nothing was sent")
        return fs, fs, request
    send_update(efs, request, sleep, log)
    log(f"sent; waiting up to {args.wait_timeout:g} s for the file system to be available again")
    after = wait_until_applied(efs, args.fs_id, args.mode, args.mibps, args.wait_timeout, args.poll,
                               sleep, clock, log)
    log("done: " + state_line(after))
    return fs, after, request


def cmd_set(args, efs, sleep, clock, out):
    change(args, efs, sleep, clock, out)
    return EXIT_OK


# --- measure ---------------------------------------------------------------

class StepLog:
    """steps.json: what was done, when, and how it ended, rewritten after every step
    so that an interrupted measurement still shows how far it got."""

    def __init__(self, path):
        self.path = path
        self.steps = []

    def run(self, name, action, **detail):
        step = {"step": name, "started": now_iso(), **detail}
        self.steps.append(step)
        self.save()
        try:
            result = action()
        except BaseException as err:
            step.update(ended=now_iso(), ok=False, error=str(err) or type(err).__name__)
            self.save()
            raise
        step.update(ended=now_iso(), ok=True)
        if isinstance(result, dict):
            step.update(result)
        self.save()
        return result

    def save(self):
        with open(self.path + ".tmp", "w") as f:
            json.dump({"steps": self.steps}, f, indent=2, default=str)
            f.write("\n")
        os.replace(self.path + ".tmp", self.path)


def now_iso():
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def bench_command(*args):
    # The benchmark is one of the repository's tools (it measures through the
    # server's own Store): run it with this interpreter from the repository
    # root, where `loadtest` and `server` are importable.
    return [sys.executable, "-m", "loadtest.efs_bench", *args]


def run_tool(run, command, log_path):
    """Run `command`, keep its output in `log_path`, fail on a non-zero exit."""
    done = run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(log_path, "w") as f:
        f.write(done.stdout or "")
        if done.stderr:
            f.write("\n--- stderr ---\n" + done.stderr)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise Failure(f"{' '.join(command[1:])} exited with {done.returncode}: {tail[0]} "
                      f"(full output in {log_path})")
    return done


def cmd_measure(args, efs, run, sleep, clock, out):
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = os.path.abspath(args.out or f"efs-measure-{args.fs_id}-{stamp}")
    bench_dir = os.path.abspath(args.dir)
    before_json, after_json = os.path.join(folder, "before.json"), os.path.join(folder, "after.json")
    bench_before = bench_command("--dir", bench_dir, "--json", before_json)
    bench_after = bench_command("--dir", bench_dir, "--json", after_json)
    compare = bench_command("--compare", before_json, after_json)

    # Refuse a pointless or invalid change before spending a benchmark on it.
    fs = describe(efs, args.fs_id, sleep)
    if plan_change(fs, args.mode, args.mibps) is None:
        raise Failure(f"{args.fs_id} already uses {describe_mode(fs)}: there is no change to measure "
                      f"(run python -m loadtest.efs_bench --dir {bench_dir} for one measurement)")
    if args.dry_run:
        print("dry run: would write into " + folder, file=out)
        for command in (bench_before, None, bench_after, compare):
            if command is None:
                change(args, efs, sleep, clock, out, fs=fs)
            else:
                print("would run: " + " ".join(command), file=out)
        return EXIT_OK

    os.makedirs(folder, exist_ok=True)
    steps = StepLog(os.path.join(folder, "steps.json"))
    print(f"measuring in {folder}", file=out, flush=True)
    steps.run("state-before", lambda: {"file_system": fs}, fs_id=args.fs_id)
    steps.run("bench-before", lambda: {"returncode": run_tool(
        run, bench_before, os.path.join(folder, "bench-before.log")).returncode}, command=bench_before)

    def switch():
        before, after, request = change(args, efs, sleep, clock, out, fs=describe(efs, args.fs_id, sleep))
        return {"request": request, "mode_before": describe_mode(before), "mode_after": describe_mode(after)}

    steps.run("set", switch, mode=args.mode, mibps=args.mibps)
    steps.run("bench-after", lambda: {"returncode": run_tool(
        run, bench_after, os.path.join(folder, "bench-after.log")).returncode}, command=bench_after)

    def write_comparison():
        done = run_tool(run, compare, os.path.join(folder, "compare.log"))
        with open(os.path.join(folder, "compare.txt"), "w") as f:
            f.write(done.stdout)
        return {"output": os.path.join(folder, "compare.txt")}

    steps.run("compare", write_comparison, command=compare)
    with open(os.path.join(folder, "compare.txt")) as f:
        print(f.read(), end="", file=out)
    print(f"results in {folder}", file=out)
    return EXIT_OK


# --- command line ----------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="efs_throughput.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit codes: 0 done, 1 error, 2 bad arguments, 3 refused by the 24-hour rule, "
               "4 timed out waiting.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("fs_id", metavar="FS_ID", help="file system id, fs-...")
        p.add_argument("--region", help="AWS Region (default: the AWS CLI's configuration)")

    def mode_options(p):
        p.add_argument("--mode", required=True, choices=MODES, help="throughput mode to switch to")
        p.add_argument("--mibps", type=float,
                       help=f"provisioned MiB/s, {MIBPS_MIN:g}-{MIBPS_MAX:g} (only with --mode provisioned)")
        p.add_argument("--dry-run", action="store_true",
                       help="print the current state and the request; send no change")
        p.add_argument("--wait-timeout", type=float, default=600,
                       help="seconds to wait for the file system to be available again (default 600)")
        p.add_argument("--poll", type=float, default=5, help=argparse.SUPPRESS)

    p = sub.add_parser("status", help="mode, size and CloudWatch metrics")
    common(p)
    p.add_argument("--hours", type=float, default=3, help="metrics window in hours (default 3)")

    p = sub.add_parser("set", help="change the throughput mode and wait until it is applied")
    common(p)
    mode_options(p)

    p = sub.add_parser("measure", help="benchmark, change the mode, benchmark again, compare")
    common(p)
    mode_options(p)
    p.add_argument("--dir", required=True, help="folder on the EFS mount for the benchmark's files")
    p.add_argument("--out", help="folder for the results (default efs-measure-FS_ID-TIMESTAMP)")
    return parser


def main(argv=None, *, efs=None, cloudwatch=None, run=subprocess.run, sleep=time.sleep,
         clock=time.monotonic, out=None):
    """Command-line entry point. Clients, the subprocess runner, sleep and the
    clock can be passed in so that tests drive every path without AWS."""
    from botocore.exceptions import BotoCoreError, ClientError

    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "status":
        if args.hours <= 0:
            parser.error("--hours must be positive")
    else:
        validate_mode_args(parser, args)
        if args.wait_timeout <= 0:
            parser.error("--wait-timeout must be positive")
    try:
        if efs is None or (cloudwatch is None and args.command == "status"):
            made_efs, made_cloudwatch = make_clients(args.region)
            efs, cloudwatch = efs or made_efs, cloudwatch or made_cloudwatch
        if args.command == "status":
            return cmd_status(args, efs, cloudwatch, sleep, out)
        if args.command == "set":
            return cmd_set(args, efs, sleep, clock, out)
        return cmd_measure(args, efs, run, sleep, clock, out)
    except Failure as failure:
        print(f"efs_throughput: error: {failure}", file=sys.stderr)
        return failure.code
    except ClientError as err:
        print(f"efs_throughput: error: {error_code(err)}: {error_message(err)}", file=sys.stderr)
        return EXIT_ERROR
    except BotoCoreError as err:  # no credentials, no Region, no network
        print(f"efs_throughput: error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

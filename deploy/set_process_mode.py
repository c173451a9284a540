#!/usr/bin/env python3
"""Change the process mode (TORNADO_PROCESSES) of the ECS service, or roll it back.

    python deploy/set_process_mode.py --cluster C --service S --processes 2 [--cpu 1024] [--memory 2048]
    python deploy/set_process_mode.py --cluster C --service S --rollback [--to ARN]

A change registers a new revision of the service's task definition that
differs from the running one ONLY in the TORNADO_PROCESSES variable of the
server container (and, when asked, the task's cpu and memory), points the
service at it and waits until the deployment is stable. It prints the old
and the new task definition ARNs; `--rollback` puts the service back on the
previous ACTIVE revision of the family (or on `--to ARN`) and waits again.
`--dry-run` prints what would be registered and sends no change.

Exit codes: 0 done (or nothing to do), 1 error, 2 bad arguments,
4 timed out waiting for the service to be stable.

A deployment replaces every task: open WebSockets (a lesson's runs) move to
the new tasks when their clients reconnect, so change modes between lessons.
"""
import argparse
import copy
import json
import re
import sys
import time

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 4
VARIABLE = "TORNADO_PROCESSES"
SERVER_CONTAINER = "server"

# What DescribeTaskDefinition returns but RegisterTaskDefinition refuses. The
# copy is made from the register call's own input shape (so a field AWS adds
# later is copied too); this list only says which dropped fields are expected.
READ_ONLY_FIELDS = ("taskDefinitionArn", "revision", "status", "requiresAttributes", "compatibilities",
                    "registeredAt", "registeredBy", "deregisteredAt", "deleteRequestedAt")


class Failure(Exception):
    """A one-line error for the operator, and the exit code that goes with it."""

    def __init__(self, message, code=EXIT_ERROR):
        super().__init__(message)
        self.code = code


def make_client(region):
    import boto3
    from botocore.config import Config

    return boto3.client("ecs", region_name=region, config=Config(retries={"mode": "standard", "max_attempts": 5}))


def revision_of(arn):
    """("family", 12) from ...:task-definition/family:12 or family:12."""
    m = re.search(r"(?:task-definition/)?([^/:]+):(\d+)$", arn)
    if not m:
        raise Failure(f"not a task definition revision: {arn}")
    return m.group(1), int(m.group(2))


# --- reading ---------------------------------------------------------------

def describe_service(ecs, cluster, service):
    answer = ecs.describe_services(cluster=cluster, services=[service])
    for found in answer.get("services", []):
        if found.get("status") != "INACTIVE":
            return found
    reasons = "; ".join(f"{f.get('arn')}: {f.get('reason')}" for f in answer.get("failures", []))
    raise Failure(f"service {service} not found in cluster {cluster}" + (f" ({reasons})" if reasons else ""))


def describe_task_definition(ecs, arn):
    """(task definition, its tags)."""
    answer = ecs.describe_task_definition(taskDefinition=arn, include=["TAGS"])
    return answer["taskDefinition"], answer.get("tags") or []


def server_container(task_definition):
    containers = task_definition["containerDefinitions"]
    named = [c for c in containers if c.get("name") == SERVER_CONTAINER]
    if named:
        return named[0]
    if len(containers) == 1:
        return containers[0]
    names = ", ".join(c.get("name", "?") for c in containers)
    raise Failure(f"no container named '{SERVER_CONTAINER}' among {names}, and more than one container")


def env_value(container, name):
    for item in container.get("environment") or []:
        if item.get("name") == name:
            return item.get("value")
    return None


# --- the new revision ------------------------------------------------------

def registrable(ecs, task_definition, tags):
    """register_task_definition parameters that recreate `task_definition`
    exactly, and the fields that were left out (read-only ones)."""
    accepted = set(ecs.meta.service_model.operation_model("RegisterTaskDefinition").input_shape.members)
    params = {k: copy.deepcopy(v) for k, v in task_definition.items() if k in accepted and v is not None}
    if tags:
        params["tags"] = copy.deepcopy(tags)
    dropped = sorted(set(task_definition) - accepted)
    return params, dropped


def with_processes(params, processes, cpu=None, memory=None):
    """A copy of `params` with TORNADO_PROCESSES (and cpu/memory) set; nothing else changes.

    The variable keeps its place in the environment list (or is appended), so
    that a diff of two revisions shows one line.
    """
    changed = copy.deepcopy(params)
    container = server_container(changed)
    environment = container.setdefault("environment", [])
    for item in environment:
        if item.get("name") == VARIABLE:
            item["value"] = str(processes)
            break
    else:
        environment.append({"name": VARIABLE, "value": str(processes)})
    # Task-level sizes are strings in the API ("1024"); EC2 tasks may leave them out.
    if cpu is not None:
        changed["cpu"] = str(cpu)
    if memory is not None:
        changed["memory"] = str(memory)
    return changed


def differences(old, new):
    lines = []
    before, after = env_value(server_container(old), VARIABLE), env_value(server_container(new), VARIABLE)
    if before != after:
        lines.append(f"{VARIABLE}: {before if before is not None else '(unset)'} -> {after}")
    for key in ("cpu", "memory"):
        if old.get(key) != new.get(key):
            lines.append(f"task {key}: {old.get(key, '(unset)')} -> {new.get(key)}")
    return lines


# --- waiting ---------------------------------------------------------------

def wait_stable(ecs, cluster, service, target_arn, timeout, poll, sleep, clock, log):
    """Poll describe_services until the service runs only `target_arn`.

    Stable means what the services_stable waiter checks (one deployment,
    runningCount == desiredCount) plus a rollout that is not IN_PROGRESS or
    FAILED; unlike that waiter it notices a deployment circuit breaker putting
    the old revision back, and its bound is one number of seconds.
    """
    deadline = clock() + timeout
    last = None
    while True:
        svc = describe_service(ecs, cluster, service)
        deployments = svc.get("deployments") or []
        primary = next((d for d in deployments if d.get("status") == "PRIMARY"), {})
        rollout = primary.get("rolloutState")
        if rollout == "FAILED":
            raise Failure(f"deployment failed: {primary.get('rolloutStateReason', 'no reason given')}")
        if svc.get("taskDefinition") != target_arn:
            raise Failure(f"the service now uses {svc.get('taskDefinition')}, not {target_arn}: rolled back "
                          "by the deployment circuit breaker, or changed by someone else; see its events")
        running, desired = svc.get("runningCount", 0), svc.get("desiredCount", 0)
        if len(deployments) <= 1 and running == desired and rollout in (None, "COMPLETED"):
            return svc
        state = (len(deployments), running, desired, rollout)
        if state != last:
            log(f"waiting: {len(deployments)} deployment(s), {running} of {desired} tasks running"
                + (f", rollout {rollout}" if rollout else ""))
            last = state
        remaining = deadline - clock()
        if remaining <= 0:
            raise Failure(f"timed out after {timeout:g} s waiting for {service} to be stable "
                          f"({running} of {desired} running, {len(deployments)} deployments); ECS goes on "
                          "deploying: check `aws ecs describe-services`, or roll back with --rollback",
                          EXIT_TIMEOUT)
        sleep(min(poll, remaining))


# --- the two actions -------------------------------------------------------

def set_processes(args, ecs, sleep, clock, log):
    svc = describe_service(ecs, args.cluster, args.service)
    old_arn = svc["taskDefinition"]
    old_td, tags = describe_task_definition(ecs, old_arn)
    params, dropped = registrable(ecs, old_td, tags)
    unexpected = [f for f in dropped if f not in READ_ONLY_FIELDS]
    if unexpected:
        log(f"warning: not copied (RegisterTaskDefinition does not accept them): {', '.join(unexpected)}")
    new_params = with_processes(params, args.processes, args.cpu, args.memory)
    changes = differences(params, new_params)
    log(f"service {args.service} in {args.cluster} runs {old_arn}")
    if not changes:
        log(f"nothing to change: it already has {VARIABLE}={args.processes}")
        return old_arn, old_arn
    for line in changes:
        log("  " + line)
    if args.dry_run:
        log("dry run: would register this task definition, then update the service to it:")
        log(json.dumps(new_params, indent=2, sort_keys=True, default=str))
        return old_arn, None
    new_arn = ecs.register_task_definition(**new_params)["taskDefinition"]["taskDefinitionArn"]
    log(f"registered {new_arn}")
    ecs.update_service(cluster=args.cluster, service=args.service, taskDefinition=new_arn)
    log(f"service updated; waiting up to {args.wait_timeout:g} s for it to be stable")
    wait_stable(ecs, args.cluster, args.service, new_arn, args.wait_timeout, args.poll, sleep, clock, log)
    log(f"old: {old_arn}")
    log(f"new: {new_arn}")
    log(f"roll back with: python deploy/set_process_mode.py --cluster {args.cluster} "
        f"--service {args.service} --rollback --to {old_arn}")
    return old_arn, new_arn


def previous_active_revision(ecs, current_arn):
    """The newest ACTIVE revision of the same family older than `current_arn`."""
    family, current = revision_of(current_arn)
    older = []
    for page in ecs.get_paginator("list_task_definitions").paginate(familyPrefix=family, status="ACTIVE"):
        for arn in page.get("taskDefinitionArns", []):
            arn_family, number = revision_of(arn)
            if arn_family == family and number < current:
                older.append((number, arn))
    if not older:
        raise Failure(f"no ACTIVE revision of {family} older than {current}; name one with --to ARN")
    return max(older)[1]


def rollback(args, ecs, sleep, clock, log):
    svc = describe_service(ecs, args.cluster, args.service)
    current = svc["taskDefinition"]
    if args.to:
        target_td, _ = describe_task_definition(ecs, args.to)
        if target_td.get("status") != "ACTIVE":
            raise Failure(f"{target_td['taskDefinitionArn']} is {target_td.get('status')}, not ACTIVE")
        target = target_td["taskDefinitionArn"]
    else:
        target = previous_active_revision(ecs, current)
        target_td, _ = describe_task_definition(ecs, target)
    current_td, _ = describe_task_definition(ecs, current)
    log(f"service {args.service} in {args.cluster} runs {current}")
    if target == current:
        log("nothing to change: that is the revision it runs")
        return current, current
    for line in differences(current_td, target_td) or ["(no difference in process mode, cpu or memory)"]:
        log("  " + line)
    if args.dry_run:
        log(f"dry run: would update the service to {target}")
        return current, None
    ecs.update_service(cluster=args.cluster, service=args.service, taskDefinition=target)
    log(f"service updated; waiting up to {args.wait_timeout:g} s for it to be stable")
    wait_stable(ecs, args.cluster, args.service, target, args.wait_timeout, args.poll, sleep, clock, log)
    log(f"old: {current}")
    log(f"new: {target}")
    return current, target


# --- command line ----------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="set_process_mode.py", description=__doc__.split("\n\n")[0],
        epilog="Exit codes: 0 done, 1 error, 2 bad arguments, 4 timed out waiting.")
    parser.add_argument("--cluster", required=True, help="ECS cluster name or ARN")
    parser.add_argument("--service", required=True, help="ECS service name or ARN")
    parser.add_argument("--processes", type=int,
                        help=f"new {VARIABLE}: worker processes per task, 0 = one per CPU (0-256)")
    parser.add_argument("--cpu", type=int, help="also set the task's CPU units (1024 = one vCPU)")
    parser.add_argument("--memory", type=int, help="also set the task's memory in MiB")
    parser.add_argument("--rollback", action="store_true",
                        help="return to the previous ACTIVE revision of the family (or --to)")
    parser.add_argument("--to", metavar="ARN", help="with --rollback: the task definition to return to")
    parser.add_argument("--wait-timeout", type=float, default=600,
                        help="seconds to wait for the service to be stable (default 600)")
    parser.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    parser.add_argument("--region", help="AWS Region (default: the AWS CLI's configuration)")
    parser.add_argument("--poll", type=float, default=10, help=argparse.SUPPRESS)
    return parser


def main(argv=None, *, ecs=None, sleep=time.sleep, clock=time.monotonic, out=None):
    """Command-line entry point; the ECS client, sleep and clock can be passed in for tests."""
    from botocore.exceptions import BotoCoreError, ClientError

    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rollback:
        if args.processes is not None or args.cpu is not None or args.memory is not None:
            parser.error("--rollback returns to an earlier revision as it was: no --processes, --cpu or --memory")
    else:
        if args.processes is None:
            parser.error("--processes is required (or --rollback)")
        if args.to:
            parser.error("--to goes with --rollback")
        if not 0 <= args.processes <= 256:
            parser.error("--processes must be from 0 to 256 (0 = one per CPU)")
        for name in ("cpu", "memory"):
            if getattr(args, name) is not None and getattr(args, name) <= 0:
                parser.error(f"--{name} must be positive")

    def log(line):
        print(line, file=out, flush=True)

    try:
        ecs = ecs or make_client(args.region)
        action = rollback if args.rollback else set_processes
        action(args, ecs, sleep, clock, log)
        return EXIT_OK
    except Failure as failure:
        print(f"set_process_mode: error: {failure}", file=sys.stderr)
        return failure.code
    except ClientError as err:
        error = err.response.get("Error", {})
        print(f"set_process_mode: error: {error.get('Code')}: {error.get('Message')}", file=sys.stderr)
        return EXIT_ERROR
    except BotoCoreError as err:  # no credentials, no Region, a parameter botocore refuses
        print(f"set_process_mode: error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

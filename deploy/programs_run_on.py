#!/usr/bin/env python3
"""Say where students' programs run in a stack made from deploy/cloudformation.yaml:
on the runner service, or back in the server task (the rollback).

    python deploy/programs_run_on.py --stack S server     # programs back in the server, no runner
    python deploy/programs_run_on.py --stack S runners    # programs on the runners again

One stack update that changes the ProgramsRunOn parameter and nothing else:
the stack's own template, every other parameter as it is (UsePreviousValue).
It prints the change, then waits until the update is complete; an update
that CloudFormation rolled back is an error. `--dry-run` prints the request
and sends nothing.

Exit codes: 0 done (or nothing to do), 1 error, 2 bad arguments,
4 timed out waiting for the update.

The update replaces the server's tasks (and starts or stops the runners):
open WebSockets move to the new tasks when their clients reconnect, and
programs running then are stopped with words. Do it between lessons.
"""
import argparse
import json
import sys
import time

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 4
PARAMETER = "ProgramsRunOn"
DONE, ROLLED_BACK = "UPDATE_COMPLETE", ("UPDATE_ROLLBACK_COMPLETE", "UPDATE_ROLLBACK_FAILED", "UPDATE_FAILED")


class Failure(Exception):
    def __init__(self, message, code=EXIT_ERROR):
        super().__init__(message)
        self.code = code


def make_client(region):
    import boto3
    from botocore.config import Config

    return boto3.client("cloudformation", region_name=region,
                        config=Config(retries={"mode": "standard", "max_attempts": 5}))


def update_request(cfn, stack, where):
    """The UpdateStack request that moves the programs to `where`; None when they are there already."""
    [described] = cfn.describe_stacks(StackName=stack)["Stacks"]
    parameters = [p["ParameterKey"] for p in described.get("Parameters", [])]
    current = {p["ParameterKey"]: p.get("ParameterValue") for p in described.get("Parameters", [])}
    if PARAMETER not in current:
        raise Failure(f"stack {stack} has no {PARAMETER} parameter: update it with this release's "
                      "deploy/cloudformation.yaml first (deploy/README.md)")
    if current[PARAMETER] == where:
        return None
    return {"StackName": stack, "UsePreviousTemplate": True,
            "Capabilities": described.get("Capabilities") or ["CAPABILITY_IAM"],
            "Parameters": [{"ParameterKey": key, "ParameterValue": where} if key == PARAMETER else
                           {"ParameterKey": key, "UsePreviousValue": True} for key in parameters]}


def wait(cfn, stack, timeout, sleep, clock):
    """Until the update is complete; Failure when rolled back or too slow."""
    deadline = clock() + timeout
    while True:
        [described] = cfn.describe_stacks(StackName=stack)["Stacks"]
        status = described["StackStatus"]
        if status == DONE:
            return
        if status in ROLLED_BACK:
            raise Failure(f"the update of {stack} ended {status} ({described.get('StackStatusReason', 'no reason')}): "
                          "its events say why (aws cloudformation describe-stack-events)")
        if clock() >= deadline:
            raise Failure(f"{stack} is still {status} after {timeout:.0f} s: it goes on; watch it in the console",
                          EXIT_TIMEOUT)
        sleep(15)


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("where", choices=["runners", "server"], help="where students' programs run")
    parser.add_argument("--stack", required=True, help="the stack's name")
    parser.add_argument("--region", help="its AWS Region (default: the environment's)")
    parser.add_argument("--dry-run", action="store_true", help="print the request, send nothing")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the update (1800)")
    return parser


def main(argv=None, *, cfn=None, sleep=time.sleep, clock=time.monotonic, out=None):
    """Command-line entry point; the CloudFormation client, sleep and clock can be passed in for tests."""
    from botocore.exceptions import BotoCoreError, ClientError

    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        cfn = cfn or make_client(args.region)
        request = update_request(cfn, args.stack, args.where)
        if request is None:
            print(f"{args.stack}: students' programs run on the {args.where} already; nothing to do", file=out)
            return EXIT_OK
        print(f"{args.stack}: {PARAMETER} -> {args.where}, every other parameter as it is", file=out)
        if args.dry_run:
            print(json.dumps(request, indent=2), file=out)
            return EXIT_OK
        began = clock()
        cfn.update_stack(**request)
        wait(cfn, args.stack, args.timeout, sleep, clock)
        print(f"{args.stack}: updated in {clock() - began:.0f} s; students' programs run on the {args.where}",
              file=out)
        return EXIT_OK
    except Failure as failure:
        print(f"programs_run_on: error: {failure}", file=sys.stderr)
        return failure.code
    except ClientError as err:
        error = err.response.get("Error", {})
        print(f"programs_run_on: error: {error.get('Code')}: {error.get('Message')}", file=sys.stderr)
        return EXIT_ERROR
    except BotoCoreError as err:
        print(f"programs_run_on: error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

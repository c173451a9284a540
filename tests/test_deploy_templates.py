"""The deployment templates: deploy/cloudformation.yaml passes cfn-lint and
holds the settings the server depends on; deploy/task-definition.json is a
valid RegisterTaskDefinition request without plaintext secrets; and
deploy/nginx.conf passes `nginx -t` and, run by Debian's nginx in front of
two stand-in instances, forwards what the server needs."""
import base64
import contextlib
import gzip
import hashlib
import http.client
import json
import os
import shutil
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from botocore.validate import ParamValidator
from moto import mock_aws

from server import config
from tests.nginx_proxy import nginx_binary, nginx_in_front

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
TEMPLATE = os.path.join(DEPLOY, "cloudformation.yaml")
TASK_DEFINITION = os.path.join(DEPLOY, "task-definition.json")
NGINX_CONF = os.path.join(DEPLOY, "nginx.conf")
SECRET_SETTINGS = {s.name for s in config.SETTINGS if s.secret}


# --- CloudFormation ----------------------------------------------------------

def test_cloudformation_passes_cfn_lint():
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from cfnlint.runner import main; sys.exit(main())", TEMPLATE],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""


@pytest.fixture(scope="module")
def template():
    from cfnlint.decode import decode

    parsed, problems = decode(TEMPLATE)
    assert not problems
    return parsed


def resource(template, name):
    return template["Resources"][name]["Properties"]


def attributes(items):
    return {item["Key"]: item["Value"] for item in items}


def test_cloudformation_load_balancer_keeps_websockets_for_a_lesson(template):
    assert attributes(resource(template, "LoadBalancer")["LoadBalancerAttributes"])[
        "idle_timeout.timeout_seconds"] == "3600"
    group = resource(template, "TargetGroup")
    assert group["HealthCheckPath"] == "/readyz" and group["Port"] == 8888
    assert attributes(group["TargetGroupAttributes"])["stickiness.enabled"] == "false"
    https = resource(template, "HttpsListener")
    assert https["Protocol"] == "HTTPS" and https["Certificates"] == [{"CertificateArn": {"Ref": "CertificateArn"}}]
    redirect = resource(template, "HttpListener")["DefaultActions"][0]
    assert redirect["Type"] == "redirect" and redirect["RedirectConfig"]["Protocol"] == "HTTPS"


def test_cloudformation_storage_and_database_are_encrypted_and_secret(template):
    files = resource(template, "FileSystem")
    assert files["Encrypted"] is True and files["ThroughputMode"] == {"Ref": "EfsThroughputMode"}
    assert template["Resources"]["FileSystem"]["DeletionPolicy"] == "Retain"
    root = resource(template, "AccessPoint")["RootDirectory"]
    assert root["Path"] == "/pyclassroom" and set(root["CreationInfo"]) == {"OwnerUid", "OwnerGid", "Permissions"}
    assert {resource(template, m)["SubnetId"]["Fn::Select"][0] for m in ("MountTargetA", "MountTargetB")} == {0, 1}
    db = resource(template, "Database")
    assert db["Engine"] == "postgres" and str(db["EngineVersion"]).split(".")[0] == "15"
    assert db["StorageEncrypted"] is True and db["DBInstanceClass"] == {"Ref": "DbInstanceClass"}
    assert template["Parameters"]["DbInstanceClass"]["Default"] == "db.t4g.small"
    assert "{{resolve:secretsmanager:${DatabaseSecret}:SecretString:password}}" in db["MasterUserPassword"]["Fn::Sub"]
    assert "GenerateSecretString" in resource(template, "DatabaseSecret")
    assert "GenerateSecretString" in resource(template, "CookieSecret")
    # No secret can be typed into a parameter (and end up in the stack's history).
    assert not [p for p in template["Parameters"] if re.search("password|secret", p, re.I)]


NO_VALUE = object()


def evaluated(template, **parameters):
    """The template's resources' properties as CloudFormation makes them
    with `parameters` (the rest at their defaults): each Fn::If decided and
    AWS::NoValue dropped. Other functions stay as written."""
    values = {name: spec.get("Default") for name, spec in template["Parameters"].items()} | parameters

    def condition(node):
        [(function, args)] = node.items()
        assert function == "Fn::Equals", node  # the only kind this template uses
        return [values[a["Ref"]] if isinstance(a, dict) else a for a in args][0] == \
            [values[a["Ref"]] if isinstance(a, dict) else a for a in args][1]
    conditions = {name: condition(node) for name, node in template.get("Conditions", {}).items()}

    def walk(node):
        if isinstance(node, dict):
            if node == {"Ref": "AWS::NoValue"}:
                return NO_VALUE
            if set(node) == {"Fn::If"}:
                name, yes, no = node["Fn::If"]
                return walk(yes if conditions[name] else no)
            return {k: w for k, w in ((k, walk(v)) for k, v in node.items()) if w is not NO_VALUE}
        if isinstance(node, list):
            return [w for w in map(walk, node) if w is not NO_VALUE]
        return node
    return {name: walk(r.get("Properties", {})) for name, r in template["Resources"].items()}


def env_of(container):
    return {e["Name"]: e["Value"] for e in container.get("Environment", [])}


def test_cloudformation_service_runs_the_server_as_configured(template):
    task = evaluated(template, ProgramsRunOn="server")["TaskDefinition"]
    assert task["RequiresCompatibilities"] == ["EC2"]
    container = task["ContainerDefinitions"][0]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["TORNADO_PROCESSES"] == {"Ref": "TornadoProcesses"}
    assert {s["Name"] for s in container["Secrets"]} == {"DATABASE_URL", "COOKIE_SECRET"}
    assert not SECRET_SETTINGS & set(env)
    assert container["StopTimeout"] >= int(env["SHUTDOWN_TIMEOUT"]) + 5
    [efs] = [v["EFSVolumeConfiguration"] for v in task["Volumes"] if "EFSVolumeConfiguration" in v]
    assert efs["TransitEncryption"] == "ENABLED" and "AccessPointId" in efs["AuthorizationConfig"]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    assert "/healthz" in " ".join(container["HealthCheck"]["Command"])
    target = resource(template, "ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == ({"Ref": "MinTasks"}, {"Ref": "MaxTasks"})
    assert resource(template, "Service")["DesiredCount"] == {"Ref": "DesiredCount"}
    tracking = resource(template, "CpuScalingPolicy")["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == "ECSServiceAverageCPUUtilization"

    # The stack's container and deploy/task-definition.json say the same.
    with open(TASK_DEFINITION) as f:
        json_container = json.load(f)["containerDefinitions"][0]
    json_env = {e["name"]: e["value"] for e in json_container["environment"]}
    assert set(json_env) == set(env)
    assert {k: v for k, v in json_env.items() if k != "TORNADO_PROCESSES"} == \
        {k: v for k, v in env.items() if k != "TORNADO_PROCESSES"}
    assert json_container["stopTimeout"] == container["StopTimeout"]


def test_cloudformation_runs_programs_on_runners_that_reach_nothing_but_the_server(template):
    """The default: the server unprivileged on Fargate, the programs on
    runners with no role, no files, no secret but the fleet's key, in a
    security group that reaches the server's port alone."""
    made = evaluated(template)
    server = made["TaskDefinition"]
    web = server["ContainerDefinitions"][0]
    assert env_of(web)["SANDBOX"] == "remote" and "FARGATE" in server["RequiresCompatibilities"]
    assert "Capabilities" not in web["LinuxParameters"] and web["ReadonlyRootFilesystem"] is True
    assert {"/tmp", "/mnt/efs"} == {m["ContainerPath"] for m in web["MountPoints"]}
    assert made["Service"]["CapacityProviderStrategy"] == [{"CapacityProvider": "FARGATE", "Weight": 1}]
    assert {s["Name"] for s in web["Secrets"]} == {"DATABASE_URL", "COOKIE_SECRET", "RUNNER_SECRET",
                                                   "RUNNER_FLEET_KEY"}

    runner_task = made["RunnerTaskDefinition"]
    [runner] = runner_task["ContainerDefinitions"]
    env = env_of(runner)
    assert "TaskRoleArn" not in runner_task and "Volumes" not in runner_task and "MountPoints" not in runner
    assert [s["Name"] for s in runner["Secrets"]] == ["RUNNER_FLEET_KEY"]
    assert not {"DATABASE_URL", "COOKIE_SECRET", "RUNNER_SECRET", "STORAGE_ROOT", "ADMIN_PASSWORD"} & set(env)
    assert runner["Command"] == ["python", "-m", "server.runner"] and env["SANDBOX"] == "local"
    assert env["RUNNER_FLEET"] == env_of(web)["RUNNER_FLEET"]
    assert runner["PortMappings"] == [{"ContainerPort": int(env["RUNNER_PORT"]), "Protocol": "tcp"}]
    # The address it registers at is the server's name in the stack's private namespace.
    assert env["RUNNER_SERVER"] == {"Fn::Sub": "http://server.${AWS::StackName}.pyclassroom.internal:8888"}
    assert made["Namespace"]["Name"] == {"Fn::Sub": "${AWS::StackName}.pyclassroom.internal"}
    assert made["ServerDiscovery"]["Name"] == "server"
    assert made["Service"]["ServiceRegistries"] == [{"RegistryArn": {"Fn::GetAtt": ["ServerDiscovery", "Arn"]}}]
    for setting in ("SANDBOX", "DATA_DIR"):
        config.BY_NAME[setting].parse(env[setting])

    # Its network: in from the server's tasks on its port, out to their port only.
    group = made["RunnerSecurityGroup"]
    assert group["SecurityGroupIngress"] == [
        {"IpProtocol": "tcp", "FromPort": 8790, "ToPort": 8790, "SourceSecurityGroupId": {"Ref": "TaskSecurityGroup"},
         "Description": "sandboxes asked by the server"}]
    assert [(e["FromPort"], e["DestinationSecurityGroupId"]) for e in group["SecurityGroupEgress"]] == \
        [(8888, {"Ref": "TaskSecurityGroup"})]
    back = made["TaskFromRunners"]
    assert (back["GroupId"], back["FromPort"], back["SourceSecurityGroupId"]) == \
        ({"Ref": "TaskSecurityGroup"}, 8888, {"Ref": "RunnerSecurityGroup"})
    for guarded in ("EfsSecurityGroup", "DatabaseSecurityGroup"):
        assert "RunnerSecurityGroup" not in json.dumps(made[guarded]), guarded
    # No task reaches the instances' metadata (their role's credentials).
    assert "ECS_AWSVPC_BLOCK_IMDS=true" in json.dumps(made["LaunchTemplate"])

    # Scaled on what the server publishes, where its role may publish it.
    from server.placement.demand import METRIC
    metric = made["RunnerDemandScalingPolicy"]["TargetTrackingScalingPolicyConfiguration"][
        "CustomizedMetricSpecification"]
    assert metric["MetricName"] == METRIC and metric["Namespace"] == env_of(web)["CLOUDWATCH_NAMESPACE"]
    publish = [p for p in made["TaskRole"]["Policies"] if p["PolicyName"] == "publish-runner-demand"][0]
    [statement] = publish["PolicyDocument"]["Statement"]
    assert statement["Action"] == "cloudwatch:PutMetricData"
    assert statement["Condition"]["StringEquals"]["cloudwatch:namespace"] == metric["Namespace"]
    target = made["RunnerScalableTarget"]
    assert (target["MinCapacity"], target["MaxCapacity"]) == ({"Ref": "MinRunners"}, {"Ref": "MaxRunners"})


def test_cloudformation_takes_the_programs_back_into_the_server_with_one_parameter(template):
    """ProgramsRunOn=server: bubblewrap in the server task again (SYS_ADMIN,
    on the EC2 instances), and no runner."""
    made = evaluated(template, ProgramsRunOn="server")
    web = made["TaskDefinition"]["ContainerDefinitions"][0]
    assert env_of(web)["SANDBOX"] == "local" and web["LinuxParameters"]["Capabilities"] == {"Add": ["SYS_ADMIN"]}
    assert web["ReadonlyRootFilesystem"] is False
    assert not {"RUNNER_FLEET", "CLOUDWATCH_NAMESPACE"} & set(env_of(web))
    assert {s["Name"] for s in web["Secrets"]} == {"DATABASE_URL", "COOKIE_SECRET"}
    assert made["Service"]["CapacityProviderStrategy"] == [{"CapacityProvider": {"Ref": "CapacityProvider"},
                                                            "Weight": 1}]
    assert made["RunnerService"]["DesiredCount"] == 0
    assert (made["RunnerScalableTarget"]["MinCapacity"], made["RunnerScalableTarget"]["MaxCapacity"]) == (0, 0)


def test_the_runners_scaling_is_a_valid_application_auto_scaling_policy(template, monkeypatch):
    """The runner service's target and policy, as the template makes them,
    registered with Application Auto Scaling (moto)."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "eu-west-1")):
        monkeypatch.setenv(name, value)
    made = evaluated(template)
    stack = "pyclassroom"

    def sub(value):
        return value["Fn::Sub"].replace("${AWS::StackName}", stack) if isinstance(value, dict) else value
    with mock_aws():
        ecs = boto3.client("ecs")
        ecs.create_cluster(clusterName=stack)
        [runner] = made["RunnerTaskDefinition"]["ContainerDefinitions"]
        ecs.register_task_definition(family=f"{stack}-runner", networkMode="awsvpc", requiresCompatibilities=["EC2"],
                                     containerDefinitions=[{"name": runner["Name"], "image": "pyclassroom:1.4.0",
                                                            "memory": 4096, "command": runner["Command"]}])
        ecs.create_service(cluster=stack, serviceName="runners", taskDefinition=f"{stack}-runner", desiredCount=1)
        scaling = boto3.client("application-autoscaling")
        target = made["RunnerScalableTarget"]
        scaling.register_scalable_target(ServiceNamespace=target["ServiceNamespace"],
                                         ScalableDimension=target["ScalableDimension"],
                                         ResourceId=f"service/{stack}/runners", MinCapacity=1, MaxCapacity=8)
        policy = made["RunnerDemandScalingPolicy"]
        tracking = dict(policy["TargetTrackingScalingPolicyConfiguration"], TargetValue=60.0)
        tracking["CustomizedMetricSpecification"] = {k: sub(v) for k, v in
                                                     tracking["CustomizedMetricSpecification"].items()}
        scaling.put_scaling_policy(PolicyName=sub(policy["PolicyName"]), ServiceNamespace="ecs",
                                   ResourceId=f"service/{stack}/runners", ScalableDimension="ecs:service:DesiredCount",
                                   PolicyType=policy["PolicyType"], TargetTrackingScalingPolicyConfiguration=tracking)
        [kept] = scaling.describe_scaling_policies(ServiceNamespace="ecs")["ScalingPolicies"]
        spec = kept["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]
        assert (spec["Namespace"], spec["MetricName"]) == (f"PyClassroom/{stack}", "RunnerDemandPercent")


# --- task-definition.json ----------------------------------------------------

PLACEHOLDER_VALUES = {
    "ACCOUNT_ID": "123456789012",
    "REGION": "eu-west-1",
    "VERSION": "1.4.0",
    "EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/pyclassroom-execution",
    "TASK_ROLE_ARN": "arn:aws:iam::123456789012:role/pyclassroom-task",
    "EFS_FILE_SYSTEM_ID": "fs-0123456789abcdef0",
    "EFS_ACCESS_POINT_ID": "fsap-0123456789abcdef0",
    "DATABASE_URL_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pyclassroom-db-url-AbCdEf",
    "COOKIE_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pyclassroom-cookie-AbCdEf",
    "LOG_GROUP": "/ecs/pyclassroom/server",
}


def filled_task_definition():
    with open(TASK_DEFINITION) as f:
        text = f.read()
    placeholders = set(re.findall(r"\$\{([^}]*)\}", text))
    assert placeholders == set(PLACEHOLDER_VALUES)
    return json.loads(re.sub(r"\$\{([A-Z_]+)\}", lambda m: PLACEHOLDER_VALUES[m.group(1)], text))


def test_task_definition_has_no_plaintext_secrets():
    with open(TASK_DEFINITION) as f:
        task = json.load(f)
    (container,) = task["containerDefinitions"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert not SECRET_SETTINGS & set(env)
    assert not [name for name in env if re.search("PASSWORD|SECRET|TOKEN|KEY", name)]
    secrets = {s["name"]: s["valueFrom"] for s in container["secrets"]}
    assert set(secrets) == {"DATABASE_URL", "COOKIE_SECRET"}
    assert all(re.fullmatch(r"\$\{[A-Z_]+_SECRET_ARN\}", v) for v in secrets.values())


def test_task_definition_settings_are_valid_for_the_server():
    task = filled_task_definition()
    (container,) = task["containerDefinitions"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    cfg = config.load({**env, "DATABASE_URL": "postgresql://u:p@db:5432/pyclassroom", "COOKIE_SECRET": "x" * 64})
    assert cfg.TORNADO_PROCESSES == 2 and cfg.TRUST_PROXY and cfg.SANDBOX == "local"
    assert cfg.STORAGE_ROOT == "/mnt/efs" and cfg.DATA_DIR == "/tmp/pyclassroom"
    assert container["stopTimeout"] >= cfg.SHUTDOWN_TIMEOUT + 5
    assert container["portMappings"] == [{"containerPort": 8888, "protocol": "tcp"}]
    assert task["requiresCompatibilities"] == ["EC2"]
    (volume,) = task["volumes"]
    assert volume["efsVolumeConfiguration"]["transitEncryption"] == "ENABLED"
    assert volume["efsVolumeConfiguration"]["authorizationConfig"]["accessPointId"].startswith("fsap-")
    assert container["mountPoints"][0]["containerPath"] == cfg.STORAGE_ROOT
    assert "http://127.0.0.1:8888/healthz" in " ".join(container["healthCheck"]["command"])
    assert container["logConfiguration"]["logDriver"] == "awslogs"


@mock_aws
def test_task_definition_is_a_valid_register_request(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    task = filled_task_definition()
    ecs = boto3.client("ecs", region_name="eu-west-1")
    shape = ecs.meta.service_model.operation_model("RegisterTaskDefinition").input_shape
    report = ParamValidator().validate(task, shape)
    assert not report.has_errors(), report.generate_report()
    registered = ecs.register_task_definition(**task)["taskDefinition"]
    assert registered["family"] == "pyclassroom-server" and registered["revision"] == 1


# --- nginx -------------------------------------------------------------------

def test_nginx_conf_passes_nginx_t(nginx_prefix):
    done = subprocess.run([nginx_binary(), "-t", "-p", nginx_prefix + "/", "-c", NGINX_CONF, "-e", "stderr"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


class Backend(BaseHTTPRequestHandler):
    """A stand-in server instance: answers with the headers it received."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, body, content_type="application/json"):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/ws/"):
            return self.websocket()
        if self.path == "/app.js":
            return self.reply("console.log('pyclassroom');\n" * 100, "application/javascript")
        self.reply(json.dumps({"port": self.server.server_port, "headers": dict(self.headers.items())}))

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        received = 0
        while received < length:
            received += len(self.rfile.read(min(1 << 20, length - received)))
        self.reply(json.dumps({"received": received}))

    def websocket(self):
        accept = base64.b64encode(hashlib.sha1(
            (self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC11B85").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept.decode())
        self.send_header("X-Seen-Upgrade", f"{self.headers['Upgrade']}/{self.headers['Connection']}")
        self.end_headers()
        self.wfile.flush()
        # Past the handshake nginx is a tunnel: echo one line, unbuffered.
        line = self.rfile.readline()
        self.wfile.write(b"echo: " + line)
        self.wfile.flush()
        self.close_connection = True


@contextlib.contextmanager
def running_nginx(nginx_prefix):
    backends = [ThreadingHTTPServer(("127.0.0.1", 0), Backend) for _ in range(2)]
    for backend in backends:
        threading.Thread(target=backend.serve_forever, daemon=True).start()
    try:
        with nginx_in_front(nginx_prefix, [b.server_port for b in backends]) as port:
            yield port, [b.server_port for b in backends]
    finally:
        for backend in backends:
            backend.shutdown()
            backend.server_close()


def request(port, method, path, headers=None, body=b""):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body or None, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_nginx_forwards_what_the_server_needs(nginx_prefix):
    with running_nginx(nginx_prefix) as (port, backend_ports):
        seen = []
        for _ in range(4):
            status, _, body = request(port, "GET", "/api/me", {
                "X-Real-IP": "6.6.6.6", "X-Scheme": "https", "X-Forwarded-For": "6.6.6.6"})
            assert status == 200
            seen.append(json.loads(body))
        # both instances get requests
        assert {s["port"] for s in seen} == set(backend_ports)
        headers = seen[0]["headers"]
        # a client cannot choose the address or scheme Tornado believes
        assert headers["X-Real-IP"] == "127.0.0.1"
        assert headers["X-Scheme"] == "http" and headers["X-Forwarded-Proto"] == "http"
        assert headers["X-Forwarded-For"].split(",")[-1].strip() == "127.0.0.1"
        assert headers["Host"] == f"127.0.0.1:{port}"
        assert "Connection" not in headers  # kept alive to the instance

        status, response_headers, body = request(port, "GET", "/app.js", {"Accept-Encoding": "gzip"})
        assert status == 200 and response_headers.get("Content-Encoding") == "gzip"
        assert gzip.decompress(body).startswith(b"console.log")

        # a file of MAX_FILE_BYTES goes through; a larger body is refused by nginx
        status, _, body = request(port, "POST", "/api/upload/home", {"Content-Type": "application/octet-stream"},
                               b"x" * (config.load({}).MAX_FILE_BYTES + 4096))
        assert status == 200 and json.loads(body)["received"] == (10 << 20) + 4096
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /api/upload/home HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (12 << 20))
            assert s.recv(100).startswith(b"HTTP/1.1 413")

        # /metrics answers for this machine (the test's client is 127.0.0.1)
        assert request(port, "GET", "/metrics")[0] == 200


def test_nginx_tunnels_websockets(nginx_prefix):
    with running_nginx(nginx_prefix) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall((f"GET /ws/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                       f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                       ).encode())
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = s.recv(4096)
                assert chunk, received
                received += chunk
            head, _, rest = received.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101"), head
            assert b"X-Seen-Upgrade: websocket/upgrade" in head
            s.sendall(b"print('hi')\n")
            while not rest.endswith(b"\n"):
                chunk = s.recv(4096)
                assert chunk, rest
                rest += chunk
            assert rest == b"echo: print('hi')\n"


# --- docker compose --------------------------------------------------------------

def compose_config(**env):
    """`docker-compose config` of the repository's file: what compose would run."""
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is not installed: apt-get install docker-compose (scripts/install-system-deps)")
    full_env = {k: v for k, v in os.environ.items() if k not in ("TORNADO_PROCESSES", "COOKIE_SECRET",
                                                                   "RUNNER_SECRET")}
    full_env.update(env)
    return subprocess.run([binary, "-f", os.path.join(ROOT, "docker-compose.yml"), "config"],
                          capture_output=True, text=True, env=full_env, timeout=60)


SECRETS = {"COOKIE_SECRET": "c" * 40, "RUNNER_SECRET": "r" * 40}


def test_compose_file_validates_and_takes_the_process_mode_from_the_environment():
    import yaml
    default = compose_config(**SECRETS)
    assert default.returncode == 0, default.stderr
    server = yaml.safe_load(default.stdout)["services"]["server"]
    assert server["environment"]["TORNADO_PROCESSES"] == "1"
    two = yaml.safe_load(compose_config(**SECRETS, TORNADO_PROCESSES="2").stdout)
    assert two["services"]["server"]["environment"]["TORNADO_PROCESSES"] == "2"
    # Every setting compose passes is one the server knows, with a valid value.
    for name, value in two["services"]["server"]["environment"].items():
        assert name in config.BY_NAME, name
        config.BY_NAME[name].parse(str(value))


def test_compose_runs_programs_on_two_runners_and_keeps_the_secrets_on_an_unprivileged_server():
    import yaml
    services = yaml.safe_load(compose_config(**SECRETS).stdout)["services"]
    server = services["server"]
    runners = dict(config.BY_NAME["RUNNERS"].parse(server["environment"]["RUNNERS"]))
    assert server["environment"]["SANDBOX"] == "remote" and sorted(runners) == ["runner-1", "runner-2"]
    # The server: no engine socket, no docker group, no capability, a read-only root.
    assert "docker.sock" not in " ".join(map(str, server["volumes"])) and "group_add" not in server
    assert server["cap_drop"] == ["ALL"] and server["read_only"] is True
    networks = yaml.safe_load(compose_config(**SECRETS).stdout)["networks"]
    for name, address in runners.items():
        runner = services[name]
        env = runner["environment"]
        assert address == f"ws://{name}:{env['RUNNER_PORT']}" and env["RUNNER_ID"] == name
        assert runner["command"] == ["python", "-m", "server.runner"]
        # No secret of the server's, and only on a network that reaches nothing else.
        assert not {"COOKIE_SECRET", "DATABASE_URL", "RUNNER_SECRET", "ADMIN_PASSWORD"} & set(env), env
        assert list(runner["networks"]) == ["runners"] and networks["runners"]["internal"] is True
        assert "/var/run/docker.sock:/var/run/docker.sock" in " ".join(map(str, runner["volumes"]))
        # Not the storage: a folder of its own, at the same path inside and out (the host's engine mounts it).
        assert "STORAGE_ROOT" not in env and server["environment"]["STORAGE_ROOT"] not in str(runner["volumes"])
        own = env["DATA_DIR"]
        assert f"{own}:{own}:rw" in [str(v) for v in runner["volumes"]], runner["volumes"]
        for setting, value in env.items():
            if not setting.startswith("RUNNER_"):
                config.BY_NAME[setting].parse(str(value))


def test_compose_refuses_to_start_without_a_cookie_secret_or_a_runner_secret():
    done = compose_config()
    assert done.returncode != 0 and "COOKIE_SECRET" in done.stderr
    done = compose_config(COOKIE_SECRET="c" * 40)
    assert done.returncode != 0 and "RUNNER_SECRET" in done.stderr

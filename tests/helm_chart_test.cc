// Checks of the Helm chart (helm/bloom-server): lint, render, and assert what operators rely
// on in the rendered manifests. Runs the real helm (scripts/install-helm.sh puts it in
// .tools/helm; $BLOOM_HELM overrides).
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace {

using bloomtest::CommandResult;
using bloomtest::RunCommand;

std::string Helm() {
  const char* env = std::getenv("BLOOM_HELM");
  return env != nullptr ? env : BLOOM_DEFAULT_HELM;
}

const std::string kChart = std::string(BLOOM_SOURCE_DIR) + "/helm/bloom-server";

// Renders the chart with `args` and indexes the documents by "Kind/name".
std::map<std::string, YAML::Node> Render(const std::string& args = "") {
  const CommandResult run = RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " ", args));
  EXPECT_EQ(run.exit_code, 0) << run.out;
  std::map<std::string, YAML::Node> objects;
  for (const YAML::Node& doc : YAML::LoadAll(run.out)) {
    if (!doc.IsMap()) continue;
    objects[doc["kind"].as<std::string>() + "/" + doc["metadata"]["name"].as<std::string>()] = doc;
  }
  return objects;
}

std::map<std::string, std::string> Env(const YAML::Node& container) {
  std::map<std::string, std::string> env;
  for (const YAML::Node& e : container["env"]) {
    env[e["name"].as<std::string>()] = e["value"] ? e["value"].as<std::string>() : "<valueFrom>";
  }
  return env;
}

class HelmChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CommandResult version = RunCommand(Helm() + " version --short");
    ASSERT_EQ(version.exit_code, 0)
        << "helm not found at " << Helm() << "; run scripts/install-helm.sh: " << version.out;
  }
};

TEST_F(HelmChartTest, LintsStrictlyWithDefaultsAndWithEverythingOn) {
  CommandResult run = RunCommand(absl::StrCat(Helm(), " lint --strict ", kChart));
  EXPECT_EQ(run.exit_code, 0) << run.out;
  run = RunCommand(absl::StrCat(Helm(), " lint --strict ", kChart, " -f ", BLOOM_SOURCE_DIR,
                                "/tests/helm/all-features.yaml"));
  EXPECT_EQ(run.exit_code, 0) << run.out;
}

TEST_F(HelmChartTest, StatefulSetHasVolumeProbesAndSecurity) {
  auto objects = Render();
  ASSERT_EQ(objects.count("StatefulSet/rel-bloom-server"), 1u) << "no StatefulSet/rel-bloom-server";
  const YAML::Node sts = objects.at("StatefulSet/rel-bloom-server");
  EXPECT_EQ(sts["spec"]["podManagementPolicy"].as<std::string>(), "Parallel");
  EXPECT_EQ(sts["spec"]["serviceName"].as<std::string>(), "rel-bloom-server-headless");
  const YAML::Node claim = sts["spec"]["volumeClaimTemplates"][0];
  EXPECT_EQ(claim["metadata"]["name"].as<std::string>(), "data");
  EXPECT_EQ(claim["spec"]["resources"]["requests"]["storage"].as<std::string>(), "10Gi");

  const YAML::Node pod = sts["spec"]["template"]["spec"];
  EXPECT_FALSE(pod["automountServiceAccountToken"].as<bool>());
  EXPECT_GE(pod["terminationGracePeriodSeconds"].as<int>(), 10);
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<int>(), 10001);
  EXPECT_EQ(pod["securityContext"]["runAsGroup"].as<int>(), 10001);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");

  const YAML::Node container = pod["containers"][0];
  const YAML::Node security = container["securityContext"];
  EXPECT_TRUE(security["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(security["allowPrivilegeEscalation"].as<bool>());
  EXPECT_EQ(security["capabilities"]["drop"][0].as<std::string>(), "ALL");
  for (const char* probe : {"startupProbe", "livenessProbe", "readinessProbe"}) {
    ASSERT_TRUE(container[probe]["grpc"]) << probe << " is not a gRPC probe";
    EXPECT_EQ(container[probe]["grpc"]["port"].as<int>(), 50051) << probe;
  }
  // The startup probe allows minutes for loading big filters.
  EXPECT_GE(container["startupProbe"]["periodSeconds"].as<int>() *
                container["startupProbe"]["failureThreshold"].as<int>(),
            120);
  EXPECT_EQ(container["ports"][0]["name"].as<std::string>(), "grpc");
  EXPECT_EQ(container["ports"][0]["containerPort"].as<int>(), 50051);
  bool data_mounted = false;
  for (const YAML::Node& mount : container["volumeMounts"]) {
    data_mounted |= mount["name"].as<std::string>() == "data" &&
                    mount["mountPath"].as<std::string>() == "/data";
  }
  EXPECT_TRUE(data_mounted);
  EXPECT_TRUE(container["resources"]["limits"]["memory"]) << "no memory limit";
  EXPECT_TRUE(container["resources"]["requests"]["cpu"]) << "no cpu request";
}

TEST_F(HelmChartTest, EtcdElectsThePrimaryWhenGivenOrDeployed) {
  // A release's own etcd: three members, peers by their headless names, a quorum-keeping PDB.
  auto objects = Render(
      "--set replicas=3 --set replication.allowUnauthenticated=true "
      "--set replication.minReplicaAcks=1 --set etcd.deploy=true "
      "--set networkPolicy.enabled=true");
  const YAML::Node etcd = objects.at("StatefulSet/rel-bloom-server-etcd");
  EXPECT_EQ(etcd["spec"]["replicas"].as<int>(), 3);
  EXPECT_EQ(etcd["spec"]["podManagementPolicy"].as<std::string>(), "Parallel");
  EXPECT_EQ(
      objects.at("PodDisruptionBudget/rel-bloom-server-etcd")["spec"]["minAvailable"].as<int>(), 2);
  EXPECT_TRUE(
      objects.at("Service/rel-bloom-server-etcd-headless")["spec"]["publishNotReadyAddresses"]
          .as<bool>());
  std::string initial_cluster;
  for (const YAML::Node& arg : etcd["spec"]["template"]["spec"]["containers"][0]["command"]) {
    if (absl::StartsWith(arg.as<std::string>(), "--initial-cluster=")) {
      initial_cluster = arg.as<std::string>();
    }
  }
  EXPECT_EQ(initial_cluster,
            "--initial-cluster="
            "rel-bloom-server-etcd-0=http://"
            "rel-bloom-server-etcd-0.rel-bloom-server-etcd-headless.default.svc:2380,"
            "rel-bloom-server-etcd-1=http://"
            "rel-bloom-server-etcd-1.rel-bloom-server-etcd-headless.default.svc:2380,"
            "rel-bloom-server-etcd-2=http://"
            "rel-bloom-server-etcd-2.rel-bloom-server-etcd-headless.default.svc:2380");
  // The etcd pods are not selected as bloom-server pods (Service, PDB, NetworkPolicy).
  EXPECT_EQ(
      etcd["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>(),
      "etcd");
  EXPECT_TRUE(objects.count("NetworkPolicy/rel-bloom-server-etcd"));
  std::map<std::string, std::string> env =
      Env(objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"][0]);
  EXPECT_EQ(env["BLOOM_ETCD_ENDPOINTS"],
            "rel-bloom-server-etcd-0.rel-bloom-server-etcd-headless.default.svc:2379,"
            "rel-bloom-server-etcd-1.rel-bloom-server-etcd-headless.default.svc:2379,"
            "rel-bloom-server-etcd-2.rel-bloom-server-etcd-headless.default.svc:2379");
  EXPECT_EQ(env["BLOOM_ADVERTISE_ADDRESS"],
            "$(POD_NAME).rel-bloom-server-headless.default.svc:50051");
  EXPECT_EQ(env["POD_NAME"], "<valueFrom>");
  EXPECT_EQ(env["BLOOM_CLUSTER"], "rel-bloom-server");
  EXPECT_EQ(env["BLOOM_LEADER_TTL"], "5s");
  EXPECT_EQ(env["BLOOM_MIN_REPLICA_ACKS"], "1");
  EXPECT_EQ(env.count("BLOOM_REPLICATE_FROM"), 0u);  // elected, not pod 0
  // Every variable is a server flag (POD_NAME is only expanded into the address).
  const CommandResult help = RunCommand(absl::StrCat(BLOOM_SERVER_PATH, " --helpfull"));
  for (const auto& [name, value] : env) {
    if (!absl::StartsWith(name, "BLOOM_") || name == "BLOOM_CONTAINER_MEMORY_BYTES") continue;
    const std::string flag = absl::AsciiStrToLower(name.substr(strlen("BLOOM_")));
    EXPECT_TRUE(absl::StrContains(help.out, "-" + flag + " ")) << name << " is no server flag";
  }

  // An existing etcd: its endpoints, no etcd of the release's own.
  objects = Render(
      "--set replicas=3 --set replication.allowUnauthenticated=true "
      "--set 'etcd.endpoints=etcd-a:2379\\,etcd-b:2379' --set etcd.cluster=feeds "
      "--set etcd.leaderTtl=10s");
  EXPECT_EQ(objects.count("StatefulSet/rel-bloom-server-etcd"), 0u);
  env =
      Env(objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"][0]);
  EXPECT_EQ(env["BLOOM_ETCD_ENDPOINTS"], "etcd-a:2379,etcd-b:2379");
  EXPECT_EQ(env["BLOOM_CLUSTER"], "feeds");
  EXPECT_EQ(env["BLOOM_LEADER_TTL"], "10s");

  // Several pods without etcd keep the static primary, and NOTES.txt says so.
  const CommandResult notes =
      RunCommand(absl::StrCat(Helm(), " install --dry-run rel ", kChart,
                              " --set replicas=3 --set replication.allowUnauthenticated=true"));
  EXPECT_EQ(notes.exit_code, 0) << notes.out;
  EXPECT_TRUE(absl::StrContains(notes.out,
                                "No etcd is configured, so there is no automatic "
                                "failover"))
      << notes.out;
  const CommandResult elected = RunCommand(absl::StrCat(
      Helm(), " install --dry-run rel ", kChart, " --set replicas=3 --set etcd.deploy=true",
      " --set replication.allowUnauthenticated=true"));
  EXPECT_TRUE(absl::StrContains(elected.out, "Automatic failover: the pods elect their primary"))
      << elected.out;
  // A TTL etcd cannot take is refused by the schema.
  EXPECT_NE(
      RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " --set etcd.leaderTtl=1500ms"))
          .exit_code,
      0);
}

TEST_F(HelmChartTest, EtcdOverTlsWithClientCertificatesAndAUser) {
  const std::string replicated = "--set replicas=3 --set replication.allowUnauthenticated=true ";
  // The release's own etcd: TLS for clients and peers, certificates required of both.
  auto objects = Render(
      replicated +
      "--set etcd.deploy=true --set etcd.tls.enabled=true "
      "--set etcd.tls.clientSecretName=etcd-client --set etcd.tls.serverSecretName=etcd-server "
      "--set etcd.auth.username=bloom --set etcd.auth.passwordSecretName=etcd-password");
  const YAML::Node etcd =
      objects.at("StatefulSet/rel-bloom-server-etcd")["spec"]["template"]["spec"];
  std::set<std::string> args;
  for (const YAML::Node& arg : etcd["containers"][0]["command"]) args.insert(arg.as<std::string>());
  for (const char* expected :
       {"--listen-client-urls=https://0.0.0.0:2379", "--listen-peer-urls=https://0.0.0.0:2380",
        "--cert-file=/etc/etcd/tls/tls.crt", "--trusted-ca-file=/etc/etcd/tls/ca.crt",
        "--client-cert-auth", "--peer-cert-file=/etc/etcd/tls/tls.crt",
        "--peer-trusted-ca-file=/etc/etcd/tls/ca.crt", "--peer-client-cert-auth"}) {
    EXPECT_TRUE(args.count(expected)) << expected;
  }
  EXPECT_EQ(etcd["volumes"][0]["secret"]["secretName"].as<std::string>(), "etcd-server");
  const YAML::Node pod = objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"];
  std::map<std::string, std::string> env = Env(pod["containers"][0]);
  EXPECT_EQ(env["BLOOM_ETCD_CA_FILE"], "/etc/bloom/etcd-tls/ca.crt");
  EXPECT_EQ(env["BLOOM_ETCD_CERT_FILE"], "/etc/bloom/etcd-tls/tls.crt");
  EXPECT_EQ(env["BLOOM_ETCD_KEY_FILE"], "/etc/bloom/etcd-tls/tls.key");
  EXPECT_EQ(env["BLOOM_ETCD_USERNAME"], "bloom");
  EXPECT_EQ(env["BLOOM_ETCD_PASSWORD_FILE"], "/etc/bloom/etcd-auth/password");
  std::map<std::string, std::string> secrets;  // volume name -> Secret
  for (const YAML::Node& volume : pod["volumes"]) {
    if (volume["secret"]) {
      secrets[volume["name"].as<std::string>()] = volume["secret"]["secretName"].as<std::string>();
    }
  }
  EXPECT_EQ(secrets["etcd-tls"], "etcd-client");
  EXPECT_EQ(secrets["etcd-auth"], "etcd-password");
  std::set<std::string> mounts;
  for (const YAML::Node& mount : pod["containers"][0]["volumeMounts"]) {
    mounts.insert(mount["mountPath"].as<std::string>());
  }
  EXPECT_TRUE(mounts.count("/etc/bloom/etcd-tls"));
  EXPECT_TRUE(mounts.count("/etc/bloom/etcd-auth"));

  // An existing etcd takes the same settings; nothing of etcd's own is rendered.
  objects = Render(replicated +
                   "--set etcd.endpoints=etcd:2379 --set etcd.tls.enabled=true "
                   "--set etcd.tls.clientSecretName=etcd-client");
  EXPECT_EQ(objects.count("StatefulSet/rel-bloom-server-etcd"), 0u);
  env =
      Env(objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"][0]);
  EXPECT_EQ(env["BLOOM_ETCD_CA_FILE"], "/etc/bloom/etcd-tls/ca.crt");
  EXPECT_EQ(env.count("BLOOM_ETCD_USERNAME"), 0u);

  // A Secret missing is a failed render naming the value.
  for (const auto& [values, named] :
       {std::pair<std::string, std::string>{"--set etcd.deploy=true --set etcd.tls.enabled=true "
                                            "--set etcd.tls.clientSecretName=c",
                                            "etcd.tls.serverSecretName"},
        {"--set etcd.deploy=true --set etcd.tls.enabled=true", "etcd.tls.clientSecretName"},
        {"--set etcd.deploy=true --set etcd.auth.username=bloom",
         "etcd.auth.passwordSecretName"}}) {
    const CommandResult run =
        RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " ", replicated, values));
    EXPECT_NE(run.exit_code, 0) << values;
    EXPECT_TRUE(absl::StrContains(run.out, named)) << run.out;
  }
}

TEST_F(HelmChartTest, EnvironmentIsWiredToValuesAndEveryVariableIsAServerFlag) {
  auto objects = Render(
      "--set config.maxBatch=500 --set config.sync=true --set config.logLevel=debug "
      "--set config.memoryLimit=3Gi --set config.listen=0.0.0.0:6000");
  const YAML::Node container =
      objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"][0];
  std::map<std::string, std::string> env = Env(container);
  EXPECT_EQ(env["BLOOM_MAX_BATCH"], "500");
  EXPECT_EQ(env["BLOOM_SYNC"], "true");
  EXPECT_EQ(env["BLOOM_LOG_LEVEL"], "debug");
  EXPECT_EQ(env["BLOOM_MEMORY_LIMIT"], "3Gi");
  EXPECT_EQ(env["BLOOM_LISTEN"], "0.0.0.0:6000");
  EXPECT_EQ(container["readinessProbe"]["grpc"]["port"].as<int>(), 6000);
  EXPECT_EQ(env["BLOOM_CONTAINER_MEMORY_BYTES"], "<valueFrom>");
  // Defaults: the memory limit is derived from the container's limit.
  env =
      Env(Render().at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"][0]);
  EXPECT_EQ(env["BLOOM_MEMORY_LIMIT"], "50%");

  // Each BLOOM_<FLAG> must be a flag the server knows, or the server would ignore it; the
  // all-features render adds the TLS and auth variables.
  for (const auto& [name, value] :
       Env(Render(absl::StrCat("-f ", BLOOM_SOURCE_DIR, "/tests/helm/all-features.yaml"))
               .at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"][0])) {
    env[name] = value;
  }
  EXPECT_EQ(env.count("BLOOM_TLS_CLIENT_CA_FILE"), 1u);
  const CommandResult help = RunCommand(absl::StrCat(BLOOM_SERVER_PATH, " --helpfull"));
  for (const auto& [name, value] : env) {
    if (!absl::StartsWith(name, "BLOOM_")) continue;       // config.extraEnv
    if (name == "BLOOM_CONTAINER_MEMORY_BYTES") continue;  // read by --memory_limit=N%
    std::string flag = absl::AsciiStrToLower(name.substr(strlen("BLOOM_")));
    EXPECT_TRUE(absl::StrContains(help.out, "-" + flag + " ")) << name << " is no server flag";
  }
}

TEST_F(HelmChartTest, ServicesPdbAndOptionalObjects) {
  auto objects = Render();
  ASSERT_EQ(objects.count("Service/rel-bloom-server"), 1u) << "no Service/rel-bloom-server";
  const YAML::Node service = objects.at("Service/rel-bloom-server");
  EXPECT_EQ(service["spec"]["type"].as<std::string>(), "ClusterIP");
  EXPECT_EQ(service["spec"]["ports"][0]["name"].as<std::string>(), "grpc");
  EXPECT_EQ(service["spec"]["ports"][0]["appProtocol"].as<std::string>(), "grpc");
  ASSERT_EQ(objects.count("Service/rel-bloom-server-headless"), 1u)
      << "no Service/rel-bloom-server-headless";
  const YAML::Node headless = objects.at("Service/rel-bloom-server-headless");
  EXPECT_EQ(headless["spec"]["clusterIP"].as<std::string>(), "None");
  EXPECT_EQ(objects.count("PodDisruptionBudget/rel-bloom-server"), 1u);
  EXPECT_EQ(objects.count("NetworkPolicy/rel-bloom-server"), 0u);
  EXPECT_EQ(objects.count("ServiceMonitor/rel-bloom-server"), 0u);
  ASSERT_EQ(objects.count("Pod/rel-bloom-server-test-health"), 1u)
      << "no Pod/rel-bloom-server-test-health";
  const YAML::Node test_pod = objects.at("Pod/rel-bloom-server-test-health");
  EXPECT_EQ(test_pod["metadata"]["annotations"]["helm.sh/hook"].as<std::string>(), "test");

  objects = Render(absl::StrCat("-f ", BLOOM_SOURCE_DIR, "/tests/helm/all-features.yaml"));
  ASSERT_EQ(objects.count("NetworkPolicy/rel-bloom-server"), 1u)
      << "no NetworkPolicy/rel-bloom-server";
  const YAML::Node policy = objects.at("NetworkPolicy/rel-bloom-server");
  EXPECT_EQ(
      policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["bloom-server-client"]
          .as<std::string>(),
      "true");
  EXPECT_EQ(objects.count("ServiceMonitor/rel-bloom-server"), 1u);
  const YAML::Node sts = objects.at("StatefulSet/rel-bloom-server");
  EXPECT_EQ(sts["spec"]["replicas"].as<int>(), 3);
  EXPECT_EQ(sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"].as<std::string>(),
            "fast");
  const YAML::Node pod = sts["spec"]["template"]["spec"];
  EXPECT_EQ(pod["imagePullSecrets"][0]["name"].as<std::string>(), "regcred");
  EXPECT_EQ(pod["nodeSelector"]["disktype"].as<std::string>(), "ssd");
  EXPECT_TRUE(pod["tolerations"]);
  EXPECT_TRUE(pod["affinity"]["podAntiAffinity"]);
  EXPECT_EQ(sts["spec"]["template"]["metadata"]["labels"]["team"].as<std::string>(), "search");
}

TEST_F(HelmChartTest, ThreeReplicasArePodZeroAndItsFollowersSpreadOverNodes) {
  // Without auth, replication needs the operator's explicit (unsafe) consent, and says so.
  const CommandResult refused =
      RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " --set replicas=3"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(refused.out, "replication.allowUnauthenticated=true"))
      << refused.out;
  const CommandResult no_token = RunCommand(
      absl::StrCat(Helm(), " template rel ", kChart, " --set replicas=3 --set auth.enabled=true"));
  EXPECT_NE(no_token.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(no_token.out, "replication.tokenSecretName")) << no_token.out;
  auto objects = Render(
      "--set replicas=3 --set replication.minReplicaAcks=1 "
      "--set replication.allowUnauthenticated=true");
  EXPECT_EQ(
      Env(objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["containers"]
                                                    [0])["BLOOM_ALLOW_UNAUTHENTICATED_REPLICATION"],
      "true");
  const YAML::Node sts = objects.at("StatefulSet/rel-bloom-server");
  EXPECT_EQ(sts["spec"]["replicas"].as<int>(), 3);
  const YAML::Node pod = sts["spec"]["template"]["spec"];
  std::map<std::string, std::string> env = Env(pod["containers"][0]);
  // Every pod replicates from pod 0 through the headless Service; pod 0 finds its own name
  // (rel-bloom-server-0) in that address and serves as the primary.
  EXPECT_EQ(env["BLOOM_REPLICATE_FROM"],
            "rel-bloom-server-0.rel-bloom-server-headless.default.svc:50051");
  EXPECT_EQ(env["BLOOM_MIN_REPLICA_ACKS"], "1");
  EXPECT_EQ(env["BLOOM_MAX_REPLICA_LAG"], "1s");
  EXPECT_EQ(sts["spec"]["serviceName"].as<std::string>(), "rel-bloom-server-headless");
  EXPECT_EQ(objects.at("Service/rel-bloom-server-headless")["spec"]["clusterIP"].as<std::string>(),
            "None");
  // The client Service selects every pod (a follower is in it once ready: caught up).
  EXPECT_EQ(objects.at("Service/rel-bloom-server")["spec"]["selector"]["app.kubernetes.io/name"]
                .as<std::string>(),
            "bloom-server");
  EXPECT_TRUE(pod["containers"][0]["readinessProbe"]["grpc"]);
  // 2 of 3 stay through voluntary disruptions.
  EXPECT_EQ(objects.at("PodDisruptionBudget/rel-bloom-server")["spec"]["maxUnavailable"].as<int>(),
            1);
  ASSERT_TRUE(pod["topologySpreadConstraints"]) << "pods are not spread";
  EXPECT_EQ(pod["topologySpreadConstraints"][0]["topologyKey"].as<std::string>(),
            "kubernetes.io/hostname");
  EXPECT_EQ(pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]
               ["app.kubernetes.io/instance"]
                   .as<std::string>(),
            "rel");

  // With auth and mutual TLS the followers get a token, the CA that verifies pod 0, and the
  // pod's own certificate to show it.
  objects = Render(absl::StrCat("-f ", BLOOM_SOURCE_DIR, "/tests/helm/all-features.yaml"));
  const YAML::Node secure = objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"];
  env = Env(secure["containers"][0]);
  EXPECT_EQ(env["BLOOM_REPLICATION_TOKEN_FILE"], "/etc/bloom/replication/token");
  EXPECT_EQ(env.count("BLOOM_ALLOW_UNAUTHENTICATED_REPLICATION"), 0u);  // auth: a token
  EXPECT_EQ(env["BLOOM_REPLICATION_CA_FILE"], "/etc/bloom/tls/ca.crt");
  EXPECT_EQ(env["BLOOM_REPLICATION_CERT_FILE"], "/etc/bloom/tls/tls.crt");
  EXPECT_EQ(env["BLOOM_REPLICATION_KEY_FILE"], "/etc/bloom/tls/tls.key");
  EXPECT_EQ(secure["topologySpreadConstraints"][0]["whenUnsatisfiable"].as<std::string>(),
            "DoNotSchedule");
  bool token_mounted = false;
  for (const YAML::Node& volume : secure["volumes"]) {
    token_mounted |= volume["name"].as<std::string>() == "replication-token" &&
                     volume["secret"]["secretName"].as<std::string>() == "bloom-replication";
  }
  EXPECT_TRUE(token_mounted);

  // One pod, or replication off: no replication, no spreading.
  for (const char* args : {"", "--set replicas=3 --set replication.enabled=false"}) {
    const YAML::Node single =
        Render(args).at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"];
    EXPECT_EQ(Env(single["containers"][0]).count("BLOOM_REPLICATE_FROM"), 0u) << args;
  }
  EXPECT_FALSE(Render().at(
      "StatefulSet/rel-bloom-server")["spec"]["template"]["spec"]["topologySpreadConstraints"]);
}

TEST_F(HelmChartTest, MetricsAreServedAndAnnotatedByDefault) {
  auto objects = Render();
  const YAML::Node pod_template = objects.at("StatefulSet/rel-bloom-server")["spec"]["template"];
  const YAML::Node container = pod_template["spec"]["containers"][0];
  EXPECT_EQ(Env(container)["BLOOM_METRICS_LISTEN"], "0.0.0.0:9090");
  EXPECT_EQ(pod_template["metadata"]["annotations"]["prometheus.io/scrape"].as<std::string>(),
            "true");
  EXPECT_EQ(pod_template["metadata"]["annotations"]["prometheus.io/port"].as<std::string>(),
            "9090");
  objects = Render("--set metrics.enabled=false");
  const YAML::Node off = objects.at("StatefulSet/rel-bloom-server")["spec"]["template"];
  EXPECT_EQ(Env(off["spec"]["containers"][0]).count("BLOOM_METRICS_LISTEN"), 0u);
  EXPECT_FALSE(off["metadata"]["annotations"]);
}

TEST_F(HelmChartTest, TlsAndAuthMountSecretsAndProbeTheHealthPort) {
  auto objects = Render(absl::StrCat("-f ", BLOOM_SOURCE_DIR, "/tests/helm/all-features.yaml"));
  const YAML::Node pod = objects.at("StatefulSet/rel-bloom-server")["spec"]["template"]["spec"];
  const YAML::Node container = pod["containers"][0];
  std::map<std::string, std::string> env = Env(container);
  EXPECT_EQ(env["BLOOM_TLS_CERT_FILE"], "/etc/bloom/tls/tls.crt");
  EXPECT_EQ(env["BLOOM_TLS_KEY_FILE"], "/etc/bloom/tls/tls.key");
  EXPECT_EQ(env["BLOOM_TLS_CLIENT_CA_FILE"], "/etc/bloom/client-ca/ca.crt");
  EXPECT_EQ(env["BLOOM_AUTH_TOKEN_FILE"], "/etc/bloom/auth/tokens");
  EXPECT_EQ(env["BLOOM_HEALTH_LISTEN"], "0.0.0.0:8086");
  // The kubelet cannot speak TLS: every probe goes to the plaintext health-only port.
  for (const char* probe : {"startupProbe", "livenessProbe", "readinessProbe"}) {
    EXPECT_EQ(container[probe]["grpc"]["port"].as<int>(), 8086) << probe;
  }
  std::map<std::string, std::string> secrets;  // volume name -> Secret
  for (const YAML::Node& volume : pod["volumes"]) {
    if (volume["secret"]) {
      secrets[volume["name"].as<std::string>()] = volume["secret"]["secretName"].as<std::string>();
    }
  }
  EXPECT_EQ(secrets["tls"], "bloom-tls");
  EXPECT_EQ(secrets["client-ca"], "bloom-client-ca");
  EXPECT_EQ(secrets["auth"], "bloom-tokens");
  std::map<std::string, std::string> mounts;
  for (const YAML::Node& mount : container["volumeMounts"]) {
    EXPECT_FALSE(mount["subPath"]) << "subPath mounts never see Secret updates";
    mounts[mount["name"].as<std::string>()] = mount["mountPath"].as<std::string>();
  }
  EXPECT_EQ(mounts["tls"], "/etc/bloom/tls");
  EXPECT_EQ(mounts["client-ca"], "/etc/bloom/client-ca");
  EXPECT_EQ(mounts["auth"], "/etc/bloom/auth");
  // helm test asks the health port, which needs neither TLS nor a token.
  const YAML::Node test_pod = objects.at("Pod/rel-bloom-server-test-health");
  EXPECT_EQ(test_pod["spec"]["containers"][0]["args"][0].as<std::string>(),
            "--server=rel-bloom-server:8086");

  // Turning TLS on without naming the Secret is an error, not a pod that cannot start.
  const CommandResult run =
      RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " --set tls.enabled=true"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(run.out, "tls.secretName is required")) << run.out;
}

TEST_F(HelmChartTest, SchemaRejectsWrongTypesUnknownKeysAndBadEnums) {
  struct Case {
    std::string set;
    std::string message;
  };
  for (const Case& c :
       {Case{"replicas=two", "replicas"}, Case{"bogus=1", "bogus"},
        Case{"config.logLevel=loud", "logLevel"}, Case{"config.memoryLimit=lots", "memoryLimit"},
        Case{"persistence.size=big", "size"}, Case{"image.pullPolicy=Sometimes", "pullPolicy"},
        Case{"config.unknownOption=1", "unknownOption"}, Case{"tls.enabled=yes", "enabled"},
        Case{"auth.secretKey=a/b", "secretKey"}, Case{"health.port=0", "port"}}) {
    const CommandResult run =
        RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " --set ", c.set));
    EXPECT_NE(run.exit_code, 0) << c.set << " was accepted";
    EXPECT_TRUE(absl::StrContains(run.out, c.message)) << c.set << ": " << run.out;
  }
}

TEST_F(HelmChartTest, ShardingGroupsAreStatefulSetsWithTheirOwnPdbAndOneMap) {
  // Each group elects its primary through etcd: sharding without failover is refused.
  const CommandResult refused =
      RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " --set sharding.groups=2"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(refused.out, "sharding.groups > 1 needs failover")) << refused.out;

  const std::string failover =
      "--set replicas=3 --set etcd.deploy=true --set replication.allowUnauthenticated=true ";
  auto objects = Render(failover + "--set sharding.groups=3 --set sharding.slots=1024");
  EXPECT_EQ(objects.count("StatefulSet/rel-bloom-server"), 0u);
  std::set<std::string> clusters;
  for (int group = 0; group < 3; ++group) {
    const std::string name = absl::StrCat("rel-bloom-server-g", group);
    ASSERT_EQ(objects.count("StatefulSet/" + name), 1u) << name;
    const YAML::Node sts = objects.at("StatefulSet/" + name);
    EXPECT_EQ(sts["spec"]["replicas"].as<int>(), 3);
    // Every group's pods are named under the one headless Service (their advertised address).
    EXPECT_EQ(sts["spec"]["serviceName"].as<std::string>(), "rel-bloom-server-headless");
    const std::string label = absl::StrCat("g", group);
    EXPECT_EQ(sts["spec"]["selector"]["matchLabels"]["bloom-server.io/group"].as<std::string>(),
              label);
    EXPECT_EQ(
        sts["spec"]["template"]["metadata"]["labels"]["bloom-server.io/group"].as<std::string>(),
        label);
    std::map<std::string, std::string> env = Env(sts["spec"]["template"]["spec"]["containers"][0]);
    EXPECT_EQ(env["BLOOM_CLUSTER"], "rel-bloom-server/" + label);
    EXPECT_EQ(env["BLOOM_SHARD_MAP"], "rel-bloom-server/shardmap");
    EXPECT_EQ(env["BLOOM_SHARD_MAP_GROUPS"],
              "rel-bloom-server/g0,rel-bloom-server/g1,rel-bloom-server/g2");
    EXPECT_EQ(env["BLOOM_SHARD_MAP_SLOTS"], "1024");
    EXPECT_FALSE(env["BLOOM_ETCD_ENDPOINTS"].empty());
    clusters.insert(env["BLOOM_CLUSTER"]);
    // Its own budget: a group keeps its quorum whatever the others do.
    ASSERT_EQ(objects.count("PodDisruptionBudget/" + name), 1u) << name;
    EXPECT_EQ(objects
                  .at("PodDisruptionBudget/" +
                      name)["spec"]["selector"]["matchLabels"]["bloom-server.io/group"]
                  .as<std::string>(),
              label);
  }
  EXPECT_EQ(clusters.size(), 3u);
  const CommandResult help = RunCommand(absl::StrCat(BLOOM_SERVER_PATH, " --helpfull"));
  for (const char* flag : {"shard_map", "shard_map_groups", "shard_map_slots"}) {
    EXPECT_TRUE(absl::StrContains(help.out, absl::StrCat("-", flag, " "))) << flag;
  }
  // The client Service reaches every group's pods (any pod serves any filter).
  EXPECT_FALSE(objects.at("Service/rel-bloom-server")["spec"]["selector"]["bloom-server.io/group"]);

  // One group: one StatefulSet named as ever, no group label, no shard map.
  objects = Render(failover);
  const YAML::Node one = objects.at("StatefulSet/rel-bloom-server");
  EXPECT_FALSE(one["spec"]["selector"]["matchLabels"]["bloom-server.io/group"]);
  EXPECT_EQ(Env(one["spec"]["template"]["spec"]["containers"][0]).count("BLOOM_SHARD_MAP"), 0u);
  EXPECT_EQ(objects.count("PodDisruptionBudget/rel-bloom-server"), 1u);
  // Bad values are refused by the schema.
  EXPECT_NE(RunCommand(absl::StrCat(Helm(), " template rel ", kChart, " ", failover,
                                    "--set sharding.slots=20000"))
                .exit_code,
            0);
}

}  // namespace

namespace {

// The chart's PrometheusRule rendered with `args`, its groups written as a rules file into
// `dir` beside the promtool unit tests (tests/helm/alerts_test.yaml); the promtool run's output.
CommandResult TestAlerts(const std::string& dir, const std::string& args) {
  auto objects = Render(absl::StrCat("--set metrics.prometheusRule.enabled=true ", args));
  EXPECT_EQ(objects.count("PrometheusRule/rel-bloom-server"), 1u);
  YAML::Emitter rules;
  rules << objects["PrometheusRule/rel-bloom-server"]["spec"];
  {
    std::FILE* out = std::fopen((dir + "/rules.yaml").c_str(), "w");
    EXPECT_NE(out, nullptr);
    if (out == nullptr) return {-1, "cannot write rules.yaml"};
    std::fputs(rules.c_str(), out);
    std::fclose(out);
  }
  const CommandResult checked =
      RunCommand(absl::StrCat("promtool check rules ", dir, "/rules.yaml"));
  EXPECT_EQ(checked.exit_code, 0) << checked.out;
  EXPECT_TRUE(absl::StrContains(checked.out, "SUCCESS: 19 rules found")) << checked.out;
  RunCommand(absl::StrCat("cp ", BLOOM_SOURCE_DIR, "/tests/helm/alerts_test.yaml ", dir));
  return RunCommand(absl::StrCat("cd ", dir, " && promtool test rules alerts_test.yaml"));
}

}  // namespace

TEST_F(HelmChartTest, AlertsFireWhenTheyShouldAndStayQuietOtherwiseInPromtool) {
  EXPECT_EQ(Render().count("PrometheusRule/rel-bloom-server"), 0u) << "off by default";
  EXPECT_EQ(Render("--set metrics.prometheusRule.enabled=true --set metrics.enabled=false")
                .count("PrometheusRule/rel-bloom-server"),
            0u)
      << "no rules without metrics";
  // Every metric an alert reads is one the server exports (the documented ones).
  std::ifstream operations(std::string(BLOOM_SOURCE_DIR) + "/docs/operations.md");
  const std::string documented((std::istreambuf_iterator<char>(operations)),
                               std::istreambuf_iterator<char>());
  const auto default_rules = Render("--set metrics.prometheusRule.enabled=true");
  for (const YAML::Node& rule :
       default_rules.at("PrometheusRule/rel-bloom-server")["spec"]["groups"][0]["rules"]) {
    const std::string expr = rule["expr"].as<std::string>();
    for (absl::string_view word : absl::StrSplit(expr, absl::ByAnyChar("(){}[] ,-/*\n"))) {
      if (!absl::StartsWith(word, "bloom_")) continue;
      std::string metric(word);
      if (absl::EndsWith(metric, "_bucket")) metric.resize(metric.size() - strlen("_bucket"));
      EXPECT_TRUE(absl::StrContains(documented, "`" + metric))
          << rule["alert"].as<std::string>() << " uses " << metric << ", which operations.md lacks";
    }
    // And has a runbook there.
    std::string anchor = absl::AsciiStrToLower(rule["alert"].as<std::string>());
    EXPECT_TRUE(absl::StrContains(documented, "#### " + rule["alert"].as<std::string>() + "\n"))
        << "no runbook for " << rule["alert"].as<std::string>();
    EXPECT_TRUE(absl::EndsWith(rule["annotations"]["runbook_url"].as<std::string>(), "#" + anchor));
  }
  bloomtest::TempDir dir;
  const CommandResult tested = TestAlerts(dir.path(), "");
  EXPECT_EQ(tested.exit_code, 0) << tested.out;
  EXPECT_TRUE(absl::StrContains(tested.out, "SUCCESS")) << tested.out;
  // The unit tests follow the thresholds: with a higher error ratio, the one in eleven calls
  // failing no longer alerts, and promtool says which test expected it.
  bloomtest::TempDir other;
  const CommandResult raised =
      TestAlerts(other.path(), "--set-json metrics.prometheusRule.thresholds.errorRatio=0.5");
  EXPECT_NE(raised.exit_code, 0) << raised.out;
  EXPECT_TRUE(absl::StrContains(raised.out, "BloomServerErrorRatioHigh")) << raised.out;
  // Another selector (a Prometheus discovering pods by annotation) reaches every expression.
  const auto objects = Render(
      "--set metrics.prometheusRule.enabled=true "
      "--set-string metrics.prometheusRule.selector='kubernetes_namespace=\"db\"'");
  YAML::Emitter rendered;
  rendered << objects.at("PrometheusRule/rel-bloom-server")["spec"];
  EXPECT_FALSE(absl::StrContains(rendered.c_str(), "job=\"rel-bloom-server\""));
  EXPECT_TRUE(absl::StrContains(rendered.c_str(), "bloom_replica_connected{kubernetes_namespace"));
}

TEST_F(HelmChartTest, TheDashboardIsAConfigMapForGrafanasSidecarWithEveryPanelTemplated) {
  EXPECT_EQ(Render().count("ConfigMap/rel-bloom-server-dashboard"), 0u) << "off by default";
  auto objects = Render(
      "--set metrics.dashboard.enabled=true --set metrics.dashboard.namespace=monitoring "
      "--set metrics.dashboard.annotations.grafana_folder=Databases");
  ASSERT_EQ(objects.count("ConfigMap/rel-bloom-server-dashboard"), 1u);
  const YAML::Node config_map = objects.at("ConfigMap/rel-bloom-server-dashboard");
  EXPECT_EQ(config_map["metadata"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
  EXPECT_EQ(config_map["metadata"]["namespace"].as<std::string>(), "monitoring");
  EXPECT_EQ(config_map["metadata"]["annotations"]["grafana_folder"].as<std::string>(), "Databases");
  // The JSON is the file shipped for importing by hand, unchanged by Helm.
  const std::string json = config_map["data"]["bloom-server.json"].as<std::string>();
  std::ifstream file(kChart + "/dashboards/bloom-server.json");
  const std::string shipped((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  EXPECT_EQ(absl::StripTrailingAsciiWhitespace(json), absl::StripTrailingAsciiWhitespace(shipped));
  const YAML::Node dashboard = YAML::Load(json);
  std::set<std::string> variables;
  for (const YAML::Node& variable : dashboard["templating"]["list"]) {
    variables.insert(variable["name"].as<std::string>());
  }
  EXPECT_EQ(variables, (std::set<std::string>{"datasource", "namespace", "job", "pod"}));
  // Every panel asks for this release's pods only, and names metrics the server exports (the
  // documented ones).
  std::ifstream operations(std::string(BLOOM_SOURCE_DIR) + "/docs/operations.md");
  const std::string documented((std::istreambuf_iterator<char>(operations)),
                               std::istreambuf_iterator<char>());
  int panels = 0;
  for (const YAML::Node& panel : dashboard["panels"]) {
    if (panel["type"].as<std::string>() == "row") continue;
    ++panels;
    const std::string title = panel["title"].as<std::string>();
    ASSERT_GT(panel["targets"].size(), 0u) << title;
    for (const YAML::Node& target : panel["targets"]) {
      const std::string expr = target["expr"].as<std::string>();
      EXPECT_TRUE(absl::StrContains(expr, R"(namespace="$namespace",job="$job",pod=~"$pod")"))
          << title << ": " << expr;
      for (absl::string_view word : absl::StrSplit(expr, absl::ByAnyChar("(){}[] ,-/*"))) {
        if (!absl::StartsWith(word, "bloom_")) continue;
        std::string metric(word);
        for (const char* suffix : {"_bucket"}) {
          if (absl::EndsWith(metric, suffix)) metric.resize(metric.size() - strlen(suffix));
        }
        EXPECT_TRUE(absl::StrContains(documented, "`" + metric))
            << title << " uses " << metric << ", which operations.md lacks";
      }
    }
  }
  EXPECT_GE(panels, 25);
}

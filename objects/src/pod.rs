use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodResourceClaim, PodSpec, PodTemplateSpec,
    ResourceClaim as ContainerClaim, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A pod whose one container runs `command` and uses the pod's claims.
#[derive(Debug, Clone)]
pub struct PodBuilder(Pod);

/// A workload's script that idles until the pod is deleted and then ends at once. `sh` runs
/// trap handlers only between commands, so the sleep runs in the background under `wait`,
/// which a trapped signal interrupts; without the trap, `sh` as the container's first process
/// ignores SIGTERM and every pod deletion waited out its whole grace period (6.3 s a deletion
/// on real nodes against 1.3 s with the trap).
pub const IDLE: &str = "trap 'exit 0' TERM; sleep 3600 & wait";

pub fn pod(namespace: &str, name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: crate::meta(name, Some(namespace)),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "workload".into(),
                image: Some("dracheck.io/workload:host".into()),
                command: Some(vec!["sh".into(), "-c".into(), format!("env; {IDLE}")]),
                ..Container::default()
            }],
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(5),
            ..PodSpec::default()
        }),
        status: None,
    })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.as_mut().expect("built with a spec")
    }

    fn add_claim(mut self, claim: PodResourceClaim) -> Self {
        let name = claim.name.clone();
        self.spec().resource_claims.get_or_insert_default().push(claim);
        for c in &mut self.spec().containers {
            c.resources
                .get_or_insert_with(ResourceRequirements::default)
                .claims
                .get_or_insert_default()
                .push(ContainerClaim { name: name.clone(), request: None });
        }
        self
    }

    /// Uses the existing ResourceClaim `claim_name` under the pod-local name `name`.
    pub fn claim(self, name: &str, claim_name: &str) -> Self {
        self.add_claim(PodResourceClaim {
            name: name.into(),
            resource_claim_name: Some(claim_name.into()),
            ..PodResourceClaim::default()
        })
    }

    /// A claim generated for this pod from the ResourceClaimTemplate `template`.
    pub fn claim_from_template(self, name: &str, template: &str) -> Self {
        self.add_claim(PodResourceClaim {
            name: name.into(),
            resource_claim_template_name: Some(template.into()),
            ..PodResourceClaim::default()
        })
    }

    /// One more container, `name`, like the first (image, restart) but running `script` and
    /// using only `request` of the pod's claim `claim` (`None`: all of it), as
    /// `resources.claims[].request` maps requests to containers. Add it after the claims:
    /// [`PodBuilder::claim`] gives every container there already the whole claim.
    pub fn container(mut self, name: &str, script: &str, claim: &str, request: Option<&str>) -> Self {
        let container = self.another(name, script, claim, request);
        self.spec().containers.push(container);
        self
    }

    /// An init container, `name`, that runs `script` to its end before the containers start,
    /// using `request` of the pod's claim `claim` (`None`: all of it).
    pub fn init_container(mut self, name: &str, script: &str, claim: &str, request: Option<&str>) -> Self {
        let container = self.another(name, script, claim, request);
        self.spec().init_containers.get_or_insert_default().push(container);
        self
    }

    fn another(&mut self, name: &str, script: &str, claim: &str, request: Option<&str>) -> Container {
        Container {
            name: name.into(),
            image: self.spec().containers[0].image.clone(),
            command: Some(vec!["sh".into(), "-c".into(), script.into()]),
            resources: Some(ResourceRequirements {
                claims: Some(vec![ContainerClaim { name: claim.into(), request: request.map(Into::into) }]),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }
    }

    /// One more container, `name`, a copy of the first (image, command, resources).
    pub fn twin(mut self, name: &str) -> Self {
        let container = Container { name: name.into(), ..self.spec().containers[0].clone() };
        self.spec().containers.push(container);
        self
    }

    /// Every container asks for `quantity` of the extended resource `resource` in its limits
    /// (and so its requests), as a pod asks for devices by an extended resource name.
    pub fn extended_resource(mut self, resource: &str, quantity: &str) -> Self {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        for c in &mut self.spec().containers {
            c.resources
                .get_or_insert_with(ResourceRequirements::default)
                .limits
                .get_or_insert_default()
                .insert(resource.into(), Quantity(quantity.into()));
        }
        self
    }

    /// Pins the pod to `node` (by its hostname label), as scenarios that share a cluster do
    /// to keep off each other's devices.
    pub fn on_node(mut self, node: &str) -> Self {
        self.spec().node_selector = Some([("kubernetes.io/hostname".to_string(), node.to_string())].into());
        self
    }

    pub fn image(mut self, image: &str) -> Self {
        self.spec().containers[0].image = Some(image.into());
        self
    }

    /// Runs `argv` as it is, without a shell.
    pub fn exec(mut self, argv: &[String]) -> Self {
        self.spec().containers[0].command = Some(argv.to_vec());
        self
    }

    /// An environment variable from the downward API, e.g. `spec.nodeName`.
    pub fn field_env(mut self, name: &str, field_path: &str) -> Self {
        self.spec().containers[0].env.get_or_insert_default().push(EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: field_path.into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Restarted when it exits, as the pods of a DaemonSet must be.
    pub fn restart_always(mut self) -> Self {
        self.spec().restart_policy = Some("Always".into());
        self
    }

    /// Runs as the ServiceAccount `name` of the pod's namespace.
    pub fn service_account(mut self, name: &str) -> Self {
        self.spec().service_account_name = Some(name.into());
        self
    }

    pub fn command(mut self, script: &str) -> Self {
        self.spec().containers[0].command = Some(vec!["sh".into(), "-c".into(), script.into()]);
        self
    }

    pub fn build(self) -> Pod {
        self.0
    }
}

/// A DaemonSet whose pods are `pod` (its spec and labels) labelled `app=<name>` on every node
/// that does not taint them away.
pub fn daemon_set(namespace: &str, name: &str, pod: Pod) -> DaemonSet {
    let labels: std::collections::BTreeMap<String, String> = [("app".to_string(), name.to_string())].into();
    let mut template_meta = pod.metadata;
    template_meta.name = None;
    template_meta.namespace = None;
    template_meta.labels.get_or_insert_default().extend(labels.clone());
    DaemonSet {
        metadata: crate::meta(name, Some(namespace)),
        spec: DaemonSetSpec {
            selector: LabelSelector { match_labels: Some(labels), ..Default::default() },
            template: PodTemplateSpec { metadata: Some(template_meta), spec: pod.spec },
            ..Default::default()
        },
        status: None,
    }
}

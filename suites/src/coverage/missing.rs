//! The upstream tests in which a driver can fail and that no scenario here answers for: they
//! have no scenario to sit beside. A scenario that comes to check one takes its row over.

use super::RowId::{A, D, E, F, G};
use super::Verdict::Missing;
use super::{INTEGRATION_BINDING_CONDITIONS, INTEGRATION_CORE, UpstreamRow, e2e, e2e_node, integration};

pub(super) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: A(6),
        test: "must report gRPC serving error, for the registrar and for the DRA service",
        at: e2e_node(537),
        asserts: "a plugin whose gRPC listener dies says so and stops, instead of running on without serving",
        guarantees: &[],
        verdict: Missing("no scenario takes a listener away from a running plugin"),
    },
    UpstreamRow {
        id: D(11),
        test: "testPublishResourceSlices: fix after update",
        at: integration(INTEGRATION_CORE, 633),
        asserts: "a slice someone else edited (an attribute added) is written back as the driver publishes it",
        guarantees: &[],
        verdict: Missing("the driver's slices are deleted behind its back here, never edited"),
    },
    UpstreamRow {
        id: E(18),
        test: "binding conditions: FailureTaints",
        at: integration(INTEGRATION_BINDING_CONDITIONS, 236),
        asserts: "the driver sets a binding failure condition and taints the device, so that the scheduler allocates another",
        guarantees: &[],
        verdict: Missing("only the path where the driver sets its binding conditions True is run"),
    },
    UpstreamRow {
        id: E(19),
        test: "binding conditions: FailureRemove",
        at: integration(INTEGRATION_BINDING_CONDITIONS, 236),
        asserts: "the driver sets a binding failure condition and withdraws the device from its slices",
        guarantees: &[],
        verdict: Missing("only the path where the driver sets its binding conditions True is run"),
    },
    UpstreamRow {
        id: E(21),
        test: "must be impossible for a node ServiceAccount to update the non-node ResourceClaim.Status.Devices",
        at: e2e(3844),
        asserts: "the driver's node credentials cannot write the device status of a claim allocated on another node",
        guarantees: &[],
        verdict: Missing("no write of a claim's status is tried with the driver's node credentials"),
    },
    UpstreamRow {
        id: F(5),
        test: "should update health to Unknown when plugin stops and recover upon restart",
        at: e2e_node(1010),
        asserts: "a restarted driver reports the health of the devices in use again",
        guarantees: &[],
        verdict: Missing("health is watched only from a driver that runs throughout"),
    },
    UpstreamRow {
        id: F(6),
        test: "should automatically reconnect both DRA and Health API after connection drop",
        at: e2e_node(1045),
        asserts: "after a restart the driver serves prepares and health again, for new claims too",
        guarantees: &[],
        verdict: Missing("no health check follows a driver restart"),
    },
    UpstreamRow {
        id: F(7),
        test: "should handle concurrent DRA operations and health monitoring",
        at: e2e_node(1091),
        asserts: "the health of several devices is reported right while prepares run",
        guarantees: &[],
        verdict: Missing("one device's health is watched, with no prepare running meanwhile"),
    },
    UpstreamRow {
        id: F(8),
        test: "should reflect device health changes for devices with ShareID",
        at: e2e_node(1233),
        asserts: "the health of a device shared by capacity reaches the pods that hold shares of it",
        guarantees: &[],
        verdict: Missing("no shared device's health is watched"),
    },
    UpstreamRow {
        id: G(1),
        test: "must mount device metadata for resource claims",
        at: e2e(901),
        asserts: "the driver writes a valid metadata file per claim and request (the claim's name, namespace, UID and \
                  generation, the request, each device with its pool and attributes), mounted into the container",
        guarantees: &[],
        verdict: Missing("no scenario reads device metadata"),
    },
    UpstreamRow {
        id: G(2),
        test: "must map device metadata to the right containers",
        at: e2e(923),
        asserts: "a container that uses one request of a claim sees that request's metadata and not the other's",
        guarantees: &[],
        verdict: Missing("no scenario reads device metadata"),
    },
    UpstreamRow {
        id: G(3),
        test: "must mount device metadata for resource claim templates",
        at: e2e(972),
        asserts: "the metadata of a claim made from a template is found under the pod's name for the claim",
        guarantees: &[],
        verdict: Missing("no scenario reads device metadata"),
    },
    UpstreamRow {
        id: G(4),
        test: "must not race when multiple drivers write metadata for the same request",
        at: e2e(1016),
        asserts: "two drivers allocated for one request each write a metadata file of their own",
        guarantees: &[],
        verdict: Missing("no scenario reads device metadata"),
    },
];

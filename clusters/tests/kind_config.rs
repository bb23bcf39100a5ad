//! The kind config dracheck generates, reviewed through a snapshot in the top-level
//! `snapshots/`: a change to what a DRA-ready kind cluster gets shows in review.

use dracheck_clusters::kind;
use dracheck_clusters::local::versions::default_release;

#[test]
fn kind_config_snapshot() {
    insta::with_settings!({ snapshot_path => "../../snapshots/clusters", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("kind-config", kind::config(default_release(), "DRAAdminAccess=true", 2));
    });
}

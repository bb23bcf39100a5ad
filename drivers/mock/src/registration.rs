//! The registration service kubelet's plugin watcher calls on `<driver>-reg.sock`.

use dracheck_kubelet_api::registration::registration_server::Registration;
use dracheck_kubelet_api::registration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use dracheck_kubelet_api::{
    DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE, HEALTH_V1_SERVICE, HEALTH_V1ALPHA1_SERVICE,
};
use tonic::{Request, Response, Status};

use crate::log;

pub struct Registrar {
    pub driver: String,
    /// The DRA socket as kubelet sees it.
    pub endpoint: String,
    /// The `register-v1beta1-only` fault: offer only the beta service (both are still served).
    pub v1beta1_only: bool,
    /// Whether the DRAResourceHealth services are served, and so offered (not with `no-health`).
    pub health: bool,
    /// The `exit-on-refused-registration` fault.
    pub exit_on_refusal: bool,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        let mut supported_versions = if self.v1beta1_only {
            log!(
                "GetInfo: {} at {} (fault register-v1beta1-only: offering {DRA_V1BETA1_SERVICE} alone)",
                self.driver,
                self.endpoint
            );
            vec![DRA_V1BETA1_SERVICE.into()]
        } else {
            log!("GetInfo: {} at {}", self.driver, self.endpoint);
            vec![DRA_V1_SERVICE.into(), DRA_V1BETA1_SERVICE.into()]
        };
        if self.health {
            // Optional services are listed beside the DRA service; the kubelet picks the newest
            // it knows.
            supported_versions.extend([HEALTH_V1_SERVICE.into(), HEALTH_V1ALPHA1_SERVICE.into()]);
        }
        Ok(Response::new(PluginInfo {
            r#type: DRA_PLUGIN_TYPE.into(),
            name: self.driver.clone(),
            endpoint: self.endpoint.clone(),
            supported_versions,
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            log!("NotifyRegistrationStatus: registered with kubelet");
        } else {
            log!("NotifyRegistrationStatus: error: kubelet did not register the plugin: {}", status.error);
            if self.exit_on_refusal {
                log!("fault exit-on-refused-registration: exiting");
                std::process::exit(1);
            }
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

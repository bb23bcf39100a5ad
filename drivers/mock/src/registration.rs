//! The registration service kubelet's plugin watcher calls on `<driver>-reg.sock`.

use dracheck_kubelet_api::registration::registration_server::Registration;
use dracheck_kubelet_api::registration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use dracheck_kubelet_api::{DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE};
use tonic::{Request, Response, Status};

use crate::log;

pub struct Registrar {
    pub driver: String,
    /// The DRA socket as kubelet sees it.
    pub endpoint: String,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        log!("GetInfo: {} at {}", self.driver, self.endpoint);
        Ok(Response::new(PluginInfo {
            r#type: DRA_PLUGIN_TYPE.into(),
            name: self.driver.clone(),
            endpoint: self.endpoint.clone(),
            supported_versions: vec![DRA_V1_SERVICE.into(), DRA_V1BETA1_SERVICE.into()],
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
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

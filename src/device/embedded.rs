//! The [`Device`] interface the runtime speaks, and the embedded IPU21
//! model behind it. A hardware driver would implement the same trait.

use crate::device::engine::ExecEngine;
use crate::device::model::{CallRecord, DeviceError, HostBuffers, ModelDevice, ProgressHook};
use crate::package::{Call, Package};
use std::sync::Arc;

/// A device a package runs on: open it, load a package, invoke host calls.
/// The caller holds the device lock around the whole session.
pub trait Device {
    /// What the device is, for logs (`model:ipu21`, `/dev/ipu0`).
    fn path(&self) -> String;
    /// Attaches to and initialises the device.
    fn open(&mut self) -> Result<(), DeviceError>;
    /// Loads every tile's image and performs the initial synchronisation.
    fn load(&mut self, package: Arc<Package>) -> Result<(), DeviceError>;
    /// Runs one host call, streaming `host.inputs` in and `host.outputs`
    /// back through the package's bindings.
    fn call(&mut self, call: Call, host: &mut HostBuffers) -> Result<CallRecord, DeviceError>;
}

/// The embedded model: tiles simulated by the executor.
pub struct EmbeddedModel {
    watchdog_cycles: u64,
    progress: Option<ProgressHook>,
    /// Packages given to [`Device::load`] are already validated.
    validated: bool,
    loaded: Option<(ModelDevice, ExecEngine)>,
}

impl EmbeddedModel {
    pub fn new(watchdog_cycles: u64) -> EmbeddedModel {
        EmbeddedModel {
            watchdog_cycles,
            progress: None,
            validated: false,
            loaded: None,
        }
    }

    /// Reports every step of a host call to `hook` (see
    /// [`ModelDevice::progress`]).
    pub(crate) fn with_progress(mut self, hook: ProgressHook) -> EmbeddedModel {
        self.progress = Some(hook);
        self
    }

    /// Loads packages without validating them again: for a caller whose
    /// packages come from `package::file::read`, which validates them.
    pub(crate) fn with_validated_packages(mut self) -> EmbeddedModel {
        self.validated = true;
        self
    }
}

impl Device for EmbeddedModel {
    fn path(&self) -> String {
        "model:ipu21".to_string()
    }

    fn open(&mut self) -> Result<(), DeviceError> {
        let path = self.path();
        tracing::info!(path = %path, "opening IPU device");
        tracing::info!(path = %path, "IPU device attached");
        tracing::info!("initializing IPU device");
        tracing::info!("IPU device initialized");
        Ok(())
    }

    fn load(&mut self, package: Arc<Package>) -> Result<(), DeviceError> {
        tracing::info!(tile_count = package.tiles.len(), "loading application");
        let mut device = if self.validated {
            ModelDevice::load_validated(Arc::clone(&package))?
        } else {
            ModelDevice::load(Arc::clone(&package))?
        };
        device.watchdog_cycles = self.watchdog_cycles;
        device.progress = self.progress.clone();
        let engine = ExecEngine::new(device.target(), &package);
        tracing::info!(
            tile_count = package.tiles.len(),
            "application loaded and initial synchronization completed"
        );
        tracing::info!("starting host exchange session");
        tracing::info!("host exchange session started");
        self.loaded = Some((device, engine));
        Ok(())
    }

    fn call(&mut self, call: Call, host: &mut HostBuffers) -> Result<CallRecord, DeviceError> {
        let Some((device, engine)) = self.loaded.as_mut() else {
            return Err(DeviceError::from(crate::package::PackageError::Invalid {
                part: "device",
                message: "no package is loaded".into(),
            }));
        };
        tracing::info!(
            call = call.name(),
            command = 0,
            phases = device.package().call(call).phase_count(),
            "invoking streaming host exchange call"
        );
        device.run_call(call, &*engine, host)
    }
}

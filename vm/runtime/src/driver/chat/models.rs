//! The models a provider offers, as its `models` endpoint lists them, for checking before a
//! run that every model it names is there.

use super::Transport;

impl super::ChatDriver {
    /// The ids of the models the provider offers (`GET .../models`), when it says.
    pub(super) async fn offered_models(&self) -> Option<Vec<String>> {
        let Transport::Http(client) = &self.transport else {
            return None;
        };
        let mut req = client
            .get(self.dialect.models_endpoint(&self.base_url))
            .timeout(self.http.timeout.min(std::time::Duration::from_secs(10)));
        for (name, value) in self.dialect.headers(self.key.as_deref()) {
            req = req.header(name, value);
        }
        let resp = req.send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let json: serde_json::Value = resp.json().await.ok()?;
        let ids: Vec<String> = json["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect();
        (!ids.is_empty()).then_some(ids)
    }
}

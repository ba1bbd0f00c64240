//! Exchanges: one turn sent and its answer read, whole or as a stream (watched for an answer
//! gone astray or repeating itself, and hung up on), retried as the HTTP options say, paced
//! by the provider's window, and kept on a tape when recording; or answered from a tape.

use super::dialect::openai::structured;
use super::dialect::stream::Assembly;
use super::request::{offered_tools, Prepared};
use super::tape::{self, Player, Sent};
use super::ChatDriver;
use crate::driver::http::{self, retrying, AttemptError, Events};
use crate::driver::pace::{self, ProviderLimits};
use crate::driver::Live;
use crate::guards::{astray, runaway};
use prose_machine::protocol::{Failure, Stop, TurnAnswer, TurnAsk, Usage};

/// Whether a streaming answer has gone astray ([`astray`]): the declarations written back,
/// or a call of a tool not in `offered` opened as text.
fn gone_astray(text: &str, offered: &[String]) -> bool {
    astray::echoes_declarations(text)
        || astray::made_up_call(text, |n| offered.iter().any(|o| o == n)).is_some()
}

/// Where a chat driver's requests go.
pub(super) enum Transport {
    /// To the provider, over HTTP.
    Http(reqwest::Client),
    /// To a tape of recorded exchanges.
    Replay(Player),
}

/// Where a streamed reply's events come from.
enum Source {
    /// The provider's response.
    Http(Events),
    /// A tape: the events recorded, then the fault the stream ended with, if it did.
    Tape(std::vec::IntoIter<Sent>, Option<String>),
}

impl Source {
    /// The next event with data: its name and data, or none at the end.
    async fn next(&mut self) -> Result<Option<(Option<String>, String)>, AttemptError> {
        match self {
            Source::Http(events) => loop {
                match events.next().await? {
                    None => return Ok(None),
                    Some(sse) => {
                        if let Some(data) = sse.data {
                            return Ok(Some((sse.event, data)));
                        }
                    }
                }
            },
            Source::Tape(events, fault) => match (events.next(), fault.take()) {
                (Some(Sent(event, data)), fault_later) => {
                    *fault = fault_later;
                    Ok(Some((event, data)))
                }
                (None, Some(f)) => Err(AttemptError::retryable(f)),
                (None, None) => Ok(None),
            },
        }
    }

    /// After the provider said the answer is complete: nothing more may come.
    async fn expect_end(&mut self) -> Result<(), AttemptError> {
        match self {
            Source::Http(events) => events.expect_end().await,
            Source::Tape(..) => match self.next().await? {
                None => Ok(()),
                Some((_, data)) => Err(AttemptError::retryable(format!(
                    "the provider's stream went on after its end: {:?}",
                    data.chars().take(80).collect::<String>()
                ))),
            },
        }
    }
}

/// What came back from one attempt, kept for the tape.
#[derive(Default)]
struct Kept {
    /// The reply was a stream.
    streamed: bool,
    /// Its events, as read.
    events: Vec<Sent>,
    /// The whole JSON body, when the reply was one.
    body: Option<serde_json::Value>,
}

impl Kept {
    /// The tape's record of the attempt, which ended in `error` if it failed.
    fn into_reply(self, error: Option<&AttemptError>) -> tape::Reply {
        if let Some(body) = self.body {
            return tape::Reply::Body { body };
        }
        match error {
            Some(AttemptError {
                refusal: Some(r), ..
            }) => tape::Reply::Refused(r.clone()),
            Some(e) if !self.streamed => tape::Reply::Fault {
                message: e.message.clone(),
            },
            _ => tape::Reply::Stream {
                events: self.events,
                fault: error.map(|e| e.message.clone()),
            },
        }
    }
}

impl ChatDriver {
    /// One exchange: the conversation of `turn` with its tools, streamed (and reported to
    /// `live`) and retried as [`HttpOptions`] say; returns the model's message and adds the
    /// tokens the provider reports to `spent`.
    pub(super) async fn exchange(
        &self,
        spent: &mut Option<Usage>,
        turn: &TurnAsk,
        live: &Live,
    ) -> Result<TurnAnswer, Failure> {
        let p = self.prepare(turn);
        let (answer, usage) = retrying(&self.http, self.key.as_deref(), |n| {
            if n > 0 {
                live.restart();
            }
            self.attempt(&p, live)
        })
        .await?;
        if let Some(u) = usage {
            *spent.get_or_insert_with(Usage::default) += self.priced(u, p.model);
        }
        if structured::asked(&p.body) {
            return Ok(structured::read(answer, turn.messages.len()));
        }
        Ok(answer)
    }

    /// One attempt at `p`, once the model's window has a place for it (the wait is not part
    /// of its time limit), within the time limit, kept on the tape when recording. How it
    /// went moves the window.
    async fn attempt(
        &self,
        p: &Prepared<'_>,
        live: &Live,
    ) -> Result<(TurnAnswer, Option<Usage>), AttemptError> {
        let permit = match &self.transport {
            Transport::Http(_) => Some(
                pace::pace_for(&self.base_url, p.model, self.ceiling)
                    .acquire()
                    .await,
            ),
            Transport::Replay(_) => None,
        };
        let mut kept = self.recorder.as_ref().map(|_| Kept::default());
        let mut limits = ProviderLimits::default();
        let result = http::within(
            self.http.timeout,
            self.attempt_within(p, live, kept.as_mut(), &mut limits),
        )
        .await;
        match (permit, &result) {
            (Some(permit), Ok(_)) => permit.answered(&limits),
            (Some(permit), Err(e)) if e.refused() => permit.refused(&ProviderLimits {
                retry_after: e.wait,
                ..limits
            }),
            // A failure says nothing of the provider's limits.
            _ => {}
        }
        if let (Some(recorder), Some(kept)) = (&self.recorder, kept) {
            let exchange = tape::Exchange {
                request: p.body.clone(),
                reply: kept.into_reply(result.as_ref().err()),
            };
            recorder.write(&exchange).map_err(AttemptError::fatal)?;
        }
        result
    }

    /// One attempt at `p`: sent (or looked up on the tape), and its reply read whole or as
    /// a stream; what came is put in `kept` when recording, and what the provider's headers
    /// say of its limits in `limits`.
    async fn attempt_within(
        &self,
        p: &Prepared<'_>,
        live: &Live,
        mut kept: Option<&mut Kept>,
        limits: &mut ProviderLimits,
    ) -> Result<(TurnAnswer, Option<Usage>), AttemptError> {
        let mut source = match &self.transport {
            Transport::Http(client) => {
                let resp = http::send(client, &self.url, &p.headers, &p.body).await?;
                *limits = ProviderLimits::from_headers(resp.headers(), chrono::Utc::now());
                if http::is_event_stream(&resp) {
                    if let Some(k) = kept.as_deref_mut() {
                        k.streamed = true;
                    }
                    Source::Http(Events::new(resp, self.http.idle))
                } else {
                    let body = http::read_json(resp).await?;
                    if let Some(k) = kept.as_deref_mut() {
                        k.body = Some(body.clone());
                    }
                    return self.whole(&body, live);
                }
            }
            Transport::Replay(player) => {
                match player.reply(&p.body).map_err(AttemptError::fatal)? {
                    tape::Reply::Body { body } => return self.whole(&body, live),
                    tape::Reply::Stream { events, fault } => {
                        Source::Tape(events.into_iter(), fault)
                    }
                    tape::Reply::Refused(refusal) => return Err(refusal.error()),
                    tape::Reply::Fault { message } => return Err(AttemptError::retryable(message)),
                }
            }
        };
        let mut assembly = Assembly::new(self.dialect);
        let mut watch = runaway::LoopWatch::default();
        let offered = offered_tools(&p.body);
        while let Some((event, data)) = source.next().await? {
            if let Some(k) = kept.as_deref_mut() {
                k.events.push(Sent(event.clone(), data.clone()));
            }
            let added = assembly
                .feed(event.as_deref(), &data)
                .map_err(AttemptError::retryable)?;
            if added.content {
                live.started();
            }
            live.text(&added.text);
            if let Some(loop_) = watch.look(assembly.text()) {
                // Hang up: what was written stays, cut after the loop's first copy.
                let keep = loop_.keep;
                return Ok(self.hung_up(assembly, keep, Stop::Repeating, Some(loop_.span), p));
            }
            if !offered.is_empty() && gone_astray(assembly.text(), &offered) {
                // What follows is declarations, or the arguments of a made-up call, often
                // for thousands of tokens: nothing worth waiting for.
                let keep = assembly.text().len();
                return Ok(self.hung_up(assembly, keep, Stop::Astray, None, p));
            }
            if assembly.ended() {
                source.expect_end().await?;
                break;
            }
        }
        assembly.finish().map_err(AttemptError::retryable)
    }

    /// A whole JSON answer, reported to `live` as one piece.
    fn whole(
        &self,
        body: &serde_json::Value,
        live: &Live,
    ) -> Result<(TurnAnswer, Option<Usage>), AttemptError> {
        let (answer, usage) = self.dialect.answer(body).map_err(AttemptError::fatal)?;
        live.started();
        live.text(&answer.text);
        Ok((answer, usage))
    }

    /// The answer of a stream hung up on (`stop` says why): its text up to `keep`, and its
    /// tokens as far as they are known (the input as the provider said it, else estimated
    /// from the request; the output estimated from what was written, at three bytes a
    /// token, as budgets estimate).
    fn hung_up(
        &self,
        assembly: Assembly,
        keep: usize,
        stop: Stop,
        repeated: Option<String>,
        p: &Prepared<'_>,
    ) -> (TurnAnswer, Option<Usage>) {
        let written = assembly.text().len() as u64;
        let input = assembly
            .input_usage()
            .unwrap_or_else(|| Usage::plain(p.body.to_string().len() as u64 / 3 + 16, 0));
        let text = assembly.text()[..keep].to_string();
        (
            TurnAnswer {
                text,
                tool_calls: Vec::new(),
                stop,
                repeated,
            },
            Some(Usage {
                output_tokens: written / 3 + 1,
                ..input
            }),
        )
    }
}

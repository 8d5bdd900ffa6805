#include "panels/serving/local_server_box.h"

#include "actions/local_server.h"
#include "actions/run.h"
#include "actions/staged_bench.h"
#include "base/progress.h"
#include "jobs/job_runner.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QClipboard>
#include <QComboBox>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QThreadPool>
#include <QTimer>
#include <QVBoxLayout>

namespace day0::ui {

namespace {

/// What a start job hands back: the server, and the checkpoint it serves.
struct Started {
    Result<std::shared_ptr<actions::LocalServer>> server = Error::internal("not run");
    std::string checkpoint;
};

} // namespace

LocalServerBox::LocalServerBox(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_progress(std::make_shared<Progress>())
{
    m_start = new QPushButton(tr("Start server"), this);
    m_start->setToolTip(tr("Serve the session's checkpoint (fp32) on a free loopback port until "
                           "stopped: benches of the session checkpoint run against it, and any "
                           "OpenAI-compatible client can use its URL"));
    m_stop = new QPushButton(tr("Stop server"), this);
    m_stop->setToolTip(tr("Refuse new requests, let those in flight finish (at most 30 s), stop"));
    m_url = new QLineEdit(this);
    m_url->setReadOnly(true);
    m_url->setPlaceholderText(tr("not serving"));
    m_copy = new QPushButton(tr("Copy"), this);
    m_copy->setToolTip(tr("Copy the server's URL"));
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_plan = new QLineEdit(this);
    m_plan->setObjectName(QStringLiteral("servePlan"));
    m_plan->setPlaceholderText(tr("one rank (or a plan: tp=2, tp=2,pp=2, ep=2,tp=2)"));
    m_plan->setToolTip(tr("Serve on the plan's sharded ranks in this process, as day0 serve "
                          "--plan: fp32, one replica, the CPU reference"));
    m_backend = createBackendCombo(this);
    m_backend->setObjectName(QStringLiteral("serveBackend"));
    m_backend->setToolTip(tr("Where the server computes, as day0 serve --backend"));
    connect(m_plan, &QLineEdit::textChanged, this, &LocalServerBox::validate);
    connect(m_backend, &QComboBox::currentIndexChanged, this, &LocalServerBox::validate);
    connect(m_start, &QPushButton::clicked, this, &LocalServerBox::start);
    connect(m_stop, &QPushButton::clicked, this, &LocalServerBox::stop);
    connect(m_copy, &QPushButton::clicked, this,
        [this] { QGuiApplication::clipboard()->setText(m_url->text()); });
    auto* row = new QHBoxLayout;
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(m_start);
    row->addWidget(m_stop);
    row->addWidget(m_url, 1);
    row->addWidget(m_copy);
    auto* where = new QHBoxLayout;
    where->setContentsMargins(0, 0, 0, 0);
    where->addWidget(new QLabel(tr("Plan"), this));
    where->addWidget(m_plan, 1);
    where->addWidget(new QLabel(tr("Backend"), this));
    where->addWidget(m_backend);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(where);
    layout->addLayout(row);
    layout->addWidget(m_status);
    m_timer = new QTimer(this);
    m_timer->setInterval(100);
    connect(m_timer, &QTimer::timeout, this,
        [this] { m_status->setText(tr("Starting: %1…").arg(toQString(m_progress->stage()))); });
    connect(&m_session, &Session::modelChanged, this, [this] {
        if (m_server || busy()) {
            release(tr("Stopped: the session's model changed (it served the previous one)."));
        }
    });
    updateButtons();
}

LocalServerBox::~LocalServerBox()
{
    m_ticket->cancel();
    if (m_server) {
        // Draining waits for requests in flight (at most 30 s): never on the GUI thread.
        QThreadPool::globalInstance()->start(
            [server = std::move(m_server)]() mutable { server.reset(); });
    }
}

bool LocalServerBox::busy() const { return m_ticket->busy(); }

void LocalServerBox::setBenchRunning(bool running)
{
    m_benchRunning = running;
    updateButtons();
}

std::string LocalServerBox::planText() const { return fromQString(m_plan->text().trimmed()); }

std::string LocalServerBox::backendName() const
{
    return fromQString(m_backend->currentData().toString());
}

void LocalServerBox::validate()
{
    actions::LocalServerOptions o;
    o.plan = planText();
    o.backend = backendName();
    auto checked = actions::checkLocalServerOptions(o);
    const bool wasRefused = !m_refusal.isEmpty();
    m_refusal = checked ? QString() : toQString(checked.error().message);
    if (!m_refusal.isEmpty()) {
        m_status->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                              .arg(errorColor().name(), m_refusal.toHtmlEscaped()));
    } else if (wasRefused && !m_server && !busy()) {
        m_status->clear();
    }
    updateButtons();
}

void LocalServerBox::updateButtons()
{
    const bool starting = busy() && !m_server;
    m_start->setEnabled(!m_server && !busy() && m_refusal.isEmpty());
    m_plan->setEnabled(!m_server && !busy());
    m_backend->setEnabled(!m_server && !busy());
    // Stop also cancels a start under way; with a bench running against the server it waits.
    m_stop->setEnabled((starting || m_server) && !m_benchRunning);
    m_copy->setEnabled(!m_url->text().isEmpty());
}

void LocalServerBox::start()
{
    if (m_server || busy() || !m_refusal.isEmpty()) {
        return;
    }
    const std::string source = fromQString(m_session.modelSource());
    if (source.empty()) {
        m_status->setText(tr("Open a model or checkpoint first (File ▸ Open)."));
        return;
    }
    m_progress->setStage("preparing the checkpoint");
    m_status->setText(tr("Starting…"));
    m_timer->start();
    actions::LocalServerOptions options;
    options.precision = "fp32";
    options.maxRunning = kMaxRequests;
    options.maxQueued = kMaxRequests;
    options.plan = planText();
    options.backend = backendName();
    std::function<Started(Progress&, std::stop_token)> work
        = [source, options, state = m_progress](Progress&, std::stop_token stop) mutable {
              Started out;
              auto checkpoint = actions::checkpointForSource(source, *state, stop);
              if (!checkpoint) {
                  out.server = checkpoint.error();
                  return out;
              }
              out.checkpoint = checkpoint->string();
              options.checkpoint = out.checkpoint;
              auto server = actions::LocalServer::start(options, *state, stop);
              if (!server) {
                  out.server = server.error();
              } else {
                  out.server = std::shared_ptr<actions::LocalServer>(std::move(*server));
              }
              return out;
          };
    m_jobs.start<Started>(
        *m_ticket, tr("Local server"), this, std::move(work), [this](Started&& started) {
            m_timer->stop();
            if (!started.server) {
                m_status->setText(
                    QStringLiteral("<span style='color:%1'>%2</span>")
                        .arg(errorColor().name(),
                            toQString(started.server.error().message).toHtmlEscaped()));
                updateButtons();
                return;
            }
            m_server = std::move(*started.server);
            m_url->setText(toQString(m_server->url()));
            QString where;
            if (!m_server->plan().empty()) {
                where = tr("plan %1, ").arg(toQString(m_server->plan()));
            }
            if (m_server->backend() != "cpu") {
                where += tr("backend %1, ").arg(toQString(m_server->backend()));
            }
            m_status->setText(
                tr("Serving %1 (%2decode: %3). Benches of the session checkpoint "
                   "run against it.")
                    .arg(toQString(started.checkpoint), where, toQString(m_server->decodePath())));
            updateButtons();
        });
    updateButtons();
}

void LocalServerBox::stop()
{
    if (m_benchRunning) {
        return;
    }
    release(tr("Stopped."));
}

void LocalServerBox::release(const QString& why)
{
    m_timer->stop();
    if (!m_server) {
        m_ticket->cancel(); // a start under way: its server, if any, is dropped undelivered
        m_status->setText(why);
        updateButtons();
        return;
    }
    // Draining waits for requests in flight: a worker holds the last reference and drops it.
    auto holder = std::make_shared<std::shared_ptr<actions::LocalServer>>(std::move(m_server));
    m_url->clear();
    m_status->setText(tr("Stopping: requests in flight finish (at most 30 s)…"));
    std::function<bool(Progress&, std::stop_token)> work = [holder](Progress&, std::stop_token) {
        holder->reset();
        return true;
    };
    m_jobs.start<bool>(
        *m_ticket, tr("Stopping the local server"), this, std::move(work), [this, why](bool&&) {
            m_status->setText(why);
            updateButtons();
        });
    updateButtons();
}

} // namespace day0::ui

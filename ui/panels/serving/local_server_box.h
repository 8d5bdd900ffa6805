#pragma once

#include <QWidget>

#include <memory>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTimer;

namespace day0 {
class Progress;
}

namespace day0::actions {
class LocalServer;
}

namespace day0::ui {

class JobRunner;
class JobTicket;
class Session;

/// A standing local server of the session's checkpoint (actions::LocalServer, the OpenAI server
/// on a free loopback port, fp32) started and stopped by hand: Start loads and binds it off the
/// GUI thread and shows its URL (selectable, with a Copy button) for any client; Stop refuses
/// new requests, lets those in flight finish (at most 30 s) and stops it, off the GUI thread.
/// It serves on one rank, on a plan's sharded ranks (a plan string, as `day0 serve --plan`) or
/// on a backend plugin the app found (as `--backend`); the fields are checked as the CLI checks
/// its flags (actions::checkLocalServerOptions), a refusal shown and Start disabled until fixed.
/// A change of the session's model stops it (it serves the previous one). GUI-thread widget.
class LocalServerBox : public QWidget {
    Q_OBJECT
public:
    /// Room for this many requests at once (running and queued) before it answers 429.
    static constexpr int kMaxRequests = 64;

    LocalServerBox(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~LocalServerBox() override;

    void start();
    void stop();
    /// The running server; null while none is (starting and stopping included).
    [[nodiscard]] std::shared_ptr<actions::LocalServer> server() const { return m_server; }
    /// While a bench runs against the server, Stop waits for it (the bench holds the server).
    void setBenchRunning(bool running);

    // Tests and screenshots.
    [[nodiscard]] QPushButton* startButton() const { return m_start; }
    [[nodiscard]] QPushButton* stopButton() const { return m_stop; }
    [[nodiscard]] QLineEdit* urlField() const { return m_url; }
    [[nodiscard]] QLabel* statusLabel() const { return m_status; }
    [[nodiscard]] QLineEdit* planField() const { return m_plan; }
    [[nodiscard]] QComboBox* backendBox() const { return m_backend; }
    /// Why the fields are refused; empty when they are not.
    [[nodiscard]] QString refusal() const { return m_refusal; }
    /// True while starting or stopping.
    [[nodiscard]] bool busy() const;

private:
    void release(const QString& why);
    void updateButtons();
    /// Checks the plan and backend fields; shows a refusal in the status line.
    void validate();
    [[nodiscard]] std::string planText() const;
    [[nodiscard]] std::string backendName() const;

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    std::shared_ptr<Progress> m_progress;
    std::shared_ptr<actions::LocalServer> m_server;
    bool m_benchRunning = false;
    QPushButton* m_start = nullptr;
    QPushButton* m_stop = nullptr;
    QPushButton* m_copy = nullptr;
    QLineEdit* m_url = nullptr;
    QLineEdit* m_plan = nullptr;
    QComboBox* m_backend = nullptr;
    QString m_refusal;
    QLabel* m_status = nullptr;
    QTimer* m_timer = nullptr;
};

} // namespace day0::ui

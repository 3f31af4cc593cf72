//! The labels of a recap the local provider writes, in the agent's language (the languages of
//! `phrases`; any other is English). `{…}` marks what is filled in.

pub struct Words {
    /// `{channel}`, `{status}` (`open` / `closed`), `{count}` messages, `{from}` and `{to}`.
    pub header: &'static str,
    pub open: &'static str,
    pub closed: &'static str,
    pub done: &'static str,
    /// A handoff no one has answered yet.
    pub waiting: &'static str,
    pub asked: &'static str,
    /// Before the answer a question got.
    pub answer: &'static str,
    pub unanswered: &'static str,
    /// `{count}` questions before the ones listed.
    pub earlier: &'static str,
    pub appointments: &'static str,
    pub deals: &'static str,
    pub handoffs: &'static str,
    pub still_open: &'static str,
    pub awaiting: &'static str,
}

const EN: Words = Words {
    header: "Conversation on {channel} ({status}): {count} messages, {from} to {to}.",
    open: "open",
    closed: "closed",
    done: "done",
    waiting: "waiting for a person",
    asked: "The contact asked:",
    answer: "Answer:",
    unanswered: "No answer.",
    earlier: "{count} earlier questions not shown",
    appointments: "Appointments:",
    deals: "Deals:",
    handoffs: "Handed to a person:",
    still_open: "Still open:",
    awaiting: "The contact's last message has no answer yet.",
};

const ES: Words = Words {
    header: "Conversación en {channel} ({status}): {count} mensajes, del {from} al {to}.",
    open: "abierta",
    closed: "cerrada",
    done: "resuelto",
    waiting: "esperando a una persona",
    asked: "El contacto preguntó:",
    answer: "Respuesta:",
    unanswered: "Sin respuesta.",
    earlier: "{count} preguntas anteriores no mostradas",
    appointments: "Citas:",
    deals: "Oportunidades:",
    handoffs: "Pasada a una persona:",
    still_open: "Pendiente:",
    awaiting: "El último mensaje del contacto aún no tiene respuesta.",
};

const FR: Words = Words {
    header: "Conversation sur {channel} ({status}) : {count} messages, du {from} au {to}.",
    open: "ouverte",
    closed: "fermée",
    done: "traité",
    waiting: "en attente d'une personne",
    asked: "Le contact a demandé :",
    answer: "Réponse :",
    unanswered: "Sans réponse.",
    earlier: "{count} questions précédentes non affichées",
    appointments: "Rendez-vous :",
    deals: "Affaires :",
    handoffs: "Transmise à une personne :",
    still_open: "En suspens :",
    awaiting: "Le dernier message du contact n'a pas encore de réponse.",
};

const DE: Words = Words {
    header: "Unterhaltung über {channel} ({status}): {count} Nachrichten, {from} bis {to}.",
    open: "offen",
    closed: "geschlossen",
    done: "erledigt",
    waiting: "wartet auf eine Person",
    asked: "Der Kontakt fragte:",
    answer: "Antwort:",
    unanswered: "Keine Antwort.",
    earlier: "{count} frühere Fragen nicht gezeigt",
    appointments: "Termine:",
    deals: "Deals:",
    handoffs: "An eine Person übergeben:",
    still_open: "Noch offen:",
    awaiting: "Die letzte Nachricht des Kontakts ist noch unbeantwortet.",
};

const PT: Words = Words {
    header: "Conversa em {channel} ({status}): {count} mensagens, de {from} a {to}.",
    open: "aberta",
    closed: "encerrada",
    done: "resolvido",
    waiting: "aguardando uma pessoa",
    asked: "O contato perguntou:",
    answer: "Resposta:",
    unanswered: "Sem resposta.",
    earlier: "{count} perguntas anteriores não mostradas",
    appointments: "Agendamentos:",
    deals: "Negócios:",
    handoffs: "Passada para uma pessoa:",
    still_open: "Pendente:",
    awaiting: "A última mensagem do contato ainda não tem resposta.",
};

const HI: Words = Words {
    header: "{channel} par baatcheet ({status}): {count} message, {from} se {to} tak.",
    open: "khuli",
    closed: "band",
    done: "poora",
    waiting: "vyakti ka intezaar",
    asked: "Contact ne poocha:",
    answer: "Jawab:",
    unanswered: "Koi jawab nahin.",
    earlier: "{count} pehle ke sawaal nahin dikhaye gaye",
    appointments: "Appointment:",
    deals: "Deals:",
    handoffs: "Team ke vyakti ko saunpa gaya:",
    still_open: "Abhi baaki:",
    awaiting: "Contact ke aakhri message ka abhi tak jawab nahin diya gaya.",
};

const AR: Words = Words {
    header: "محادثة على {channel} ({status}): {count} رسالة، من {from} إلى {to}.",
    open: "مفتوحة",
    closed: "مغلقة",
    done: "منجز",
    waiting: "بانتظار شخص",
    asked: "سأل جهة الاتصال:",
    answer: "الرد:",
    unanswered: "بلا رد.",
    earlier: "{count} أسئلة سابقة غير معروضة",
    appointments: "المواعيد:",
    deals: "الصفقات:",
    handoffs: "أُحيلت إلى شخص:",
    still_open: "ما زال مفتوحاً:",
    awaiting: "آخر رسالة من جهة الاتصال لم يُرد عليها بعد.",
};

/// The labels for an agent's language tag.
pub fn of(tag: &str) -> &'static Words {
    match super::super::phrases::primary(tag).as_str() {
        "es" => &ES,
        "fr" => &FR,
        "de" => &DE,
        "pt" => &PT,
        "hi" => &HI,
        "ar" => &AR,
        _ => &EN,
    }
}

//! stub
pub struct Environment; pub struct RewriteScratch; pub struct RewriteSettings;

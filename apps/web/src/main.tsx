import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import './app/console.css';
import { MantineProvider } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { RouterProvider } from 'react-router';
import { queryClient } from './app/query';
import { router } from './app/router';

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    {/* no inline <style>: the default theme's variables are in styles.css, the global classes in console.css */}
    <MantineProvider withGlobalClasses={false} defaultColorScheme="light">
      <Notifications position="top-right" />
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
